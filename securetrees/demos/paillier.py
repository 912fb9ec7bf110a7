"""``securetrees demo paillier``: a short tour of the Paillier core at 2048 bits.

Key generation, each encryption mode with its measured time, a homomorphic
sum of encoded floats, a batch on two worker processes, the byte formats, and
an overflow being caught instead of wrapping.  Times are medians of a few
calls on this machine; ``python benchmarks/run.py paillier`` measures them
properly, against phe.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

from securetrees.encoding import FixedPoint
from securetrees.errors import EncodingOverflowError, KeyMismatchError, SecureTreesError
from securetrees.paillier import (
    Ciphertext,
    PrivateKey,
    PublicKey,
    RandomnessPool,
    generate_keypair,
    sum_ciphertexts,
)
from securetrees.paillier.batch import decrypt_many, encrypt_many

ABOUT = "Paillier encryption modes, homomorphic sums, timings"
"""One line for ``securetrees demo --list``."""


def _fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:8.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:8.2f} ms"
    return f"{seconds:8.2f} s "


def _median_time(fn: Callable[[], object], calls: int) -> float:
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="securetrees demo paillier", description=__doc__)
    parser.add_argument("--bits", type=int, default=2048, choices=[2048, 3072],
                        help="modulus size (default 2048)")
    args = parser.parse_args(list(argv))

    print(f"== Paillier, {args.bits}-bit modulus ==\n")
    t0 = time.perf_counter()
    pk, sk = generate_keypair(args.bits)
    print(f"key generation (DJN primes p ≡ q ≡ 3 mod 4, hs) {_fmt(time.perf_counter() - t0)}")
    print(f"  {pk!r}\n  {sk!r}   <- no secret in the repr")
    t0 = time.perf_counter()
    pk.comb_table()
    sk.comb_tables()
    print(f"comb tables for hs (one-off, public + key owner) {_fmt(time.perf_counter() - t0)}\n")

    print("encryption modes (median of a few calls):")
    m = -123456789
    modes: list[tuple[str, Callable[[], Ciphertext], int]] = [
        ("classic r^N (as phe)", lambda: pk.encrypt(m, mode="classic"), 5),
        ("DJN, |N|/2-bit exponent (default)", lambda: pk.encrypt(m), 30),
        ("DJN, short 2κ-bit exponent (opt-in)", lambda: pk.encrypt(m, mode="djn-short"), 30),
        ("key owner, DJN by CRT", lambda: sk.encrypt(m), 30),
        ("key owner, classic r^N by CRT", lambda: sk.encrypt(m, mode="classic"), 10),
    ]
    for name, fn, calls in modes:
        elapsed = _median_time(fn, calls)
        if sk.decrypt(fn()) != m:
            raise SecureTreesError(f"mode {name} did not decrypt")
        print(f"  {name:<38}{_fmt(elapsed)}")

    with ProcessPoolExecutor(2) as ex:
        pool = RandomnessPool(pk)
        t0 = time.perf_counter()
        pool.fill(400, executor=ex)
        fill = time.perf_counter() - t0
        online = _median_time(lambda: pk.encrypt(m, pool=pool), 300)
        print(f"  {'pooled: online part (one mulmod)':<38}{_fmt(online)}"
              f"   (400 values precomputed on 2 processes in {fill:.2f} s; each used once)")

        print("\nhomomorphic sum of encoded floats (one public scale 2^-32):")
        fp = FixedPoint(32)
        xs = [1.25, -3.5, 2.125, 0.001, 1e6]
        total = sum_ciphertexts([pk.encrypt_fixed(fp.fixed(x)).ciphertext for x in xs])
        print(f"  {' + '.join(map(str, xs))} = {sk.decrypt(total) / fp.scale:.6f}"
              f"   (plain: {sum(xs):.6f}, precision {fp.precision:.1e} per value)")
        scaled = pk.encrypt_fixed(fp.fixed(2.5)) * fp.fixed(-0.5)
        print(f"  2.5 * -0.5 = {sk.decrypt_fixed(scaled)}   (scale tracked: 2^-{scaled.frac_bits})")

        values = list(range(-48, 48))
        serial = _median_time(lambda: encrypt_many(pk, values), 3)
        parallel = _median_time(lambda: encrypt_many(pk, values, executor=ex), 3)
        cts = encrypt_many(pk, values, executor=ex)
        if decrypt_many(sk, cts, executor=ex) != values:
            raise SecureTreesError("batch did not decrypt")
        print(f"\nbatch: encrypt_many of {len(values)} values (DJN)")
        print(f"  1 process {_fmt(serial)}, 2 processes {_fmt(parallel)}"
              f"  ({serial / parallel:.2f}x; randomness drawn in the parent)")

    print("\nbyte formats (versioned, key id, no pickle):")
    pk_bytes = pk.to_bytes()
    derived = cts[0] + cts[1]  # a deterministic transformation: not fresh
    wire = derived.to_bytes()  # ... so to_bytes re-randomises it first
    back = Ciphertext.from_bytes(wire, PublicKey.from_bytes(pk_bytes))
    print(f"  public key {len(pk_bytes)} B, id {pk.key_id.hex()}")
    print(f"  ciphertext {len(wire)} B, fresh={derived.fresh} -> re-randomised on to_bytes;"
          f" decrypts to {sk.decrypt(back)}")
    sealed = sk.to_encrypted_bytes("correct horse battery staple", scrypt_log2_n=15)
    opened = PrivateKey.from_encrypted_bytes(sealed, "correct horse battery staple")
    print(f"  private key sealed with scrypt + AES-GCM: {len(sealed)} B; reopened: "
          f"{opened.decrypt(back) == sk.decrypt(back)}")

    print("\nwhat is refused:")
    bound = pk.n // 3
    near = pk.encrypt(bound - 1)
    try:
        sk.decrypt(near + near)
    except EncodingOverflowError as exc:
        print(f"  (N/3 - 1) + (N/3 - 1): EncodingOverflowError: {exc}")
    other, _ = generate_keypair(args.bits)
    try:
        _ = near + other.encrypt(1)
    except KeyMismatchError as exc:
        print(f"  adding ciphertexts of two keys: KeyMismatchError: {exc}")
    return 0
