"""``securetrees demo dtpkc``: DT-PKC and the two-server protocols at 2048 bits.

The KGC sets up the system; each party gets a weak key; a joint key is opened by its two holders;
the CS and the CC add across keys (HoAdd) and compare (HoLT) over the in-process network. The
demo prints what the CC received and the traffic. Times are single runs; ``python
benchmarks/run.py dtpkc`` measures properly. See ``specs/dtpkc.md``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Sequence

from securetrees.dtpkc import KGC, decrypt_weak, encrypt, hreenc, parhdec1, parhdec2
from securetrees.dtpkc.twoserver import CentralServer, ComputationServer, HoLTParams
from securetrees.encoding import FixedPoint
from securetrees.errors import InsecureParameterWarning, KeyMismatchError
from securetrees.runtime import InProcessNetwork

ABOUT = "DT-PKC keys, HoAdd and HoLT between the two servers"
"""One line for ``securetrees demo --list``."""


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="securetrees demo dtpkc", description=__doc__)
    parser.add_argument("--bits", type=int, default=2048, choices=[1024, 2048, 3072],
                        help="modulus size (default 2048; 1024 is insecure and warns)")
    args = parser.parse_args(list(argv))

    print(f"== DT-PKC, {args.bits}-bit N ==\n")
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("always", InsecureParameterWarning)
        kgc = KGC.setup(args.bits, allow_insecure=args.bits < 2048)
    print(f"KGC setup (safe primes, generator of order λ): {time.perf_counter() - t0:.2f} s")
    cs_share, cc_share = kgc.strong_shares()
    weak = {name: kgc.issue_weak_key(name) for name in ("cs", "cc", "alice", "bob")}
    kgc.forget_strong_key()
    print(f"  {cs_share!r}\n  {weak['alice']!r}   <- no secret in the repr\n")

    fp = FixedPoint(32)
    salary, threshold = 52_000.75, 48_500.0
    c_alice = encrypt(weak["alice"].public, fp.encode(salary))
    c_bob = encrypt(weak["bob"].public, fp.encode(threshold))
    try:
        _ = c_alice + c_bob
    except KeyMismatchError as exc:
        print(f"adding across keys without the protocol: KeyMismatchError ({exc})")
    joint = hreenc(weak["cs"], c_alice)
    opened = parhdec2(weak["cs"], parhdec1(weak["alice"], joint))
    print(f"HReEnc to h_alice·h_cs, ParHDec1 (alice) + ParHDec2 (cs): {fp.decode(opened)}")

    net = InProcessNetwork()
    holt = HoLTParams()
    cs = CentralServer("cs", net, share=cs_share, weak_key=weak["cs"], holt_params=holt)
    ComputationServer("cc", net, share=cc_share, weak_key=weak["cc"], directory=kgc.directory(),
                      holt_params=holt)
    for _ in range(3):  # the first runs build the comb tables of the joint keys
        t0 = time.perf_counter()
        total = cs.hoadd(c_alice, c_bob)
        t_add = time.perf_counter() - t0
        t0 = time.perf_counter()
        less = cs.holt(c_bob, c_alice)  # [threshold < salary], under h_cs·h_alice
        t_lt = time.perf_counter() - t0
    s = parhdec2(weak["alice"], parhdec1(weak["bob"], total))  # under h_alice·h_bob
    bit = parhdec2(weak["cs"], parhdec1(weak["alice"], less))
    print(f"HoAdd  {t_add * 1e3:7.1f} ms: salary + threshold = {fp.decode(s)}")
    print(f"HoLT   {t_lt * 1e3:7.1f} ms: threshold < salary -> {bit}")
    print("(times of the third run)\n\nwhat the CC received:")
    for rec in net.transcript.view("cc"):
        print(f"  round {rec.round}: {rec.type_name} from {rec.sender}, {rec.size} bytes")
    print(f"total {net.transcript.total_bytes} bytes in {net.transcript.rounds} rounds")
    print(f"\nweak decryption by alice of her own value: {fp.decode(decrypt_weak(weak['alice'], c_alice))}")
    return 0
