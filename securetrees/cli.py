"""The ``securetrees`` command.

``securetrees demo [NAME] [ARGS...]`` runs a demonstration on data shipped
with the package; ``securetrees demo --list`` shows what exists.  Demos are
named here as ``module:function`` strings and imported only when run, so the
command starts fast and the core package never imports a protocol module
(the protocols' demos live beside their code, in ``protocols/*/demo.py``).
Each demo function takes the remaining command-line arguments and returns an
exit status.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Final

from securetrees import __version__
from securetrees.errors import SecureTreesError

__all__ = ["DEFAULT_DEMO", "DEMOS", "main"]

DEMOS: Final[dict[str, tuple[str, str]]] = {
    # name: ("module:function", one-line description)
    "paillier": ("securetrees.demos.paillier:main", "Paillier encryption modes, homomorphic sums, timings"),
    "dtpkc": ("securetrees.demos.dtpkc:main", "DT-PKC keys, HoAdd and HoLT between the two servers"),
    "revfrf": ("protocols.revfrf.demo:main", "RevFRF on Adult: train, encrypted prediction, revocation"),
    "federated-forest": ("protocols.federated_forest.demo:main", "Federated Forest on Adult, vertical clients"),
    "hybridtree": ("protocols.hybridtree.demo:main", "HybridTree on Adult's hybrid split, host and 5 guests"),
    "histogram-forest": ("protocols.histogram_forest.demo:main", "Cross-silo histogram forest on Adult"),
}
"""Every demo, in the order ``--list`` shows them."""

DEFAULT_DEMO: Final = "paillier"
"""What ``securetrees demo`` runs when no name is given."""


def _load(target: str) -> Callable[[Sequence[str]], int]:
    module_name, _, attr = target.partition(":")
    fn = getattr(importlib.import_module(module_name), attr)
    if not callable(fn):
        raise TypeError(f"demo entry {target} is not callable")
    return fn  # type: ignore[no-any-return]


def _demo(args: argparse.Namespace) -> int:
    if args.list:
        width = max(len(n) for n in DEMOS)
        for name, (_, about) in DEMOS.items():
            marker = " (default)" if name == DEFAULT_DEMO else ""
            print(f"  {name.ljust(width)}  {about}{marker}")
        return 0
    name = args.name or DEFAULT_DEMO
    if name not in DEMOS:
        print(f"securetrees: unknown demo {name!r}; try 'securetrees demo --list'", file=sys.stderr)
        return 2
    return _load(DEMOS[name][0])(list(args.demo_args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="securetrees",
        description="Cryptography-first building blocks for privacy-preserving federated tree learning.",
    )
    parser.add_argument("--version", action="version", version=f"securetrees {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="run a demonstration on embedded data",
        description="Run a demonstration; extra arguments go to the demo (try NAME --help).",
    )
    demo.add_argument("name", nargs="?", help=f"which demo (default: {DEFAULT_DEMO})")
    demo.add_argument("demo_args", nargs=argparse.REMAINDER, help="arguments for the demo")
    demo.add_argument("--list", action="store_true", help="list the demos and exit")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        status: int = args.func(args)
    except SecureTreesError as exc:
        print(f"securetrees: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
