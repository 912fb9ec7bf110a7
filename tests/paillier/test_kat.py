"""Known-answer tests: a tiny key, DeterministicRandom, exact numbers (specs/paillier.md)."""

from __future__ import annotations

from securetrees.paillier import PrivateKey, PublicKey
from securetrees.rand import DeterministicRandom
from securetrees.testing.paillier import keypair_from_primes, small_keypair

from .conftest import TINY_P, TINY_Q

N = TINY_P * TINY_Q
HS = 16204701082362741896363621511104759315
KEY_ID = "7c4c49a62488040fb8249f17c759c656"
DJN_CT = 11845498668235095070787929273406238662
CLASSIC_CT = 103376306425116767858821423635460445
CRT_CT = 6076393456199843836560995996836007329
SMALL_512_ID = "1914c8edbeb403a9f653047528b0c3ca"


def test_tiny_key_pins_n_hs_and_id(tiny_keys: tuple[PublicKey, PrivateKey]) -> None:
    pk, _ = tiny_keys
    assert pk.n == 4613937942806659589
    assert pk.hs == HS
    assert pk.key_id.hex() == KEY_ID
    # hs = (-x^2)^N mod N^2 for the x drawn first from the helper's deterministic stream
    rng = DeterministicRandom(f"testing/paillier/{TINY_P}/{TINY_Q}")
    x = rng.randbelow(N - 2) + 2
    assert pk.hs == pow(N - x * x % N, N, N * N)


def test_djn_encryption_formula(tiny_keys: tuple[PublicKey, PrivateKey]) -> None:
    pk, sk = tiny_keys
    c = pk.encrypt(-42, rng=DeterministicRandom("kat/djn"))
    a = DeterministicRandom("kat/djn").randbits(32)  # |N| = 63 bits, ⌈|N|/2⌉ = 32
    assert c.value == (1 + (N - 42) * N) * pow(pk.hs, a, N * N) % (N * N)
    assert c.value == DJN_CT
    assert sk.decrypt(c) == -42


def test_classic_encryption_formula(tiny_keys: tuple[PublicKey, PrivateKey]) -> None:
    pk, sk = tiny_keys
    c = pk.encrypt(7, mode="classic", rng=DeterministicRandom("kat/classic"))
    r = DeterministicRandom("kat/classic").randbelow(N - 1) + 1
    assert c.value == (1 + 7 * N) * pow(r, N, N * N) % (N * N)
    assert c.value == CLASSIC_CT
    assert sk.decrypt(c) == 7


def test_key_owner_encryption_formula(tiny_keys: tuple[PublicKey, PrivateKey]) -> None:
    _pk, sk = tiny_keys
    c = sk.encrypt(7, mode="classic", rng=DeterministicRandom("kat/crt"))
    rng = DeterministicRandom("kat/crt")
    p, q = max(TINY_P, TINY_Q), min(TINY_P, TINY_Q)
    rp, rq = rng.randbelow(p - 1) + 1, rng.randbelow(q - 1) + 1
    # the obfuscator is the unique x mod N^2 with x = rp^p (mod p^2), x = rq^q (mod q^2)
    xp, xq = pow(rp, p, p * p), pow(rq, q, q * q)
    obf = xq + q * q * ((xp - xq) * pow(q * q, -1, p * p) % (p * p))
    assert c.value == (1 + 7 * N) * obf % (N * N)
    assert c.value == CRT_CT
    assert pow(obf, (p - 1) * (q - 1), N * N) == 1  # an N-th residue
    assert sk.decrypt(c) == 7


def test_key_owner_djn_equals_public_djn(tiny_keys: tuple[PublicKey, PrivateKey]) -> None:
    """The key owner computes the same hs^a by CRT: same randomness, same ciphertext."""
    pk, sk = tiny_keys
    for mode in ("djn", "djn-short"):
        a = sk.encrypt(-42, mode=mode, rng=DeterministicRandom("kat/djn"))  # type: ignore[arg-type]
        b = pk.encrypt(-42, mode=mode, rng=DeterministicRandom("kat/djn"))  # type: ignore[arg-type]
        assert a.value == b.value
    assert sk.encrypt(-42, rng=DeterministicRandom("kat/djn")).value == DJN_CT


def test_homomorphic_values_pinned(tiny_keys: tuple[PublicKey, PrivateKey]) -> None:
    pk, sk = tiny_keys
    c = pk.encrypt(5, rng=DeterministicRandom("kat/a"))
    d = pk.encrypt(-3, rng=DeterministicRandom("kat/b"))
    n2 = N * N
    assert (c + d).value == c.value * d.value % n2
    assert (c * 3).value == pow(c.value, 3, n2)
    assert (-c).value == pow(c.value, -1, n2)
    assert (c + 10).value == c.value * (1 + 10 * N) % n2
    assert sk.decrypt(c * -4 + d) == -23


def test_small_keypair_is_deterministic() -> None:
    pk, _sk = small_keypair(512)
    assert pk.bits == 512
    assert pk.key_id.hex() == SMALL_512_ID
    assert keypair_from_primes(TINY_P, TINY_Q)[0] == keypair_from_primes(TINY_P, TINY_Q)[0]
