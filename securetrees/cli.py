"""The ``securetrees`` command.

``securetrees demo [NAME] [ARGS...]`` runs a demonstration on data shipped
with the package; ``securetrees demo --list`` shows what exists.  Demos are
the ``securetrees.demos`` entry points (:mod:`securetrees.plugins`), imported
only when run, so the core package never names a protocol module (the
protocols' demos live beside their code, in ``protocols/*/demo.py``).  Each
demo function takes the remaining command-line arguments and returns an exit
status.

``securetrees party`` serves one role of a networked run; ``securetrees operator
{status,fit,resume,predict,revoke,stop}`` drives the running roles from the operator's machine
(:mod:`securetrees.net.operate`); ``securetrees federation init|launch`` makes and runs a trial
with every role on this machine.  ``securetrees setup ...`` (:mod:`securetrees.setup_command`) makes
a real run's files, one organisation's step per command: the CA, keys and certificates, protocol
key material, ``run.toml``.

The command configures :mod:`logging` (the library itself never does): records of the
``securetrees`` loggers at ``--log-level`` (default INFO) go to stderr; ``party`` and
``operator`` write them to a file instead: ``--log-file``, else ``ROLE.log`` in ``--log-dir``
(default ``logs/`` beside the configuration), and an error that ends the command is logged
there too.  Demos show progress by default (``--no-progress`` turns it off).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from securetrees import __version__, plugins
from securetrees.errors import SecureTreesError
from securetrees.files import private_dir
from securetrees.log import configure as configure_logging
from securetrees.log import get_logger
from securetrees.log import reset as reset_logging
from securetrees.setup_command import add_setup_parser

__all__ = ["DEFAULT_DEMO", "LOG_LEVELS", "main"]

LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR")

DEFAULT_DEMO: Final = "paillier"
"""What ``securetrees demo`` runs when no name is given."""


def _demo(args: argparse.Namespace) -> int:
    demos = plugins.registered(plugins.DEMOS)
    if args.list:
        width = max(map(len, demos), default=0)
        for name in demos:
            marker = " (default)" if name == DEFAULT_DEMO else ""
            print(f"  {name.ljust(width)}  {plugins.demo_about(name)}{marker}")
        return 0
    name = args.name or DEFAULT_DEMO
    if name not in demos:
        print(f"securetrees: unknown demo {name!r}; try 'securetrees demo --list'", file=sys.stderr)
        return 2
    return plugins.load_demo(name)(list(args.demo_args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="securetrees",
        description="Cryptography-first building blocks for privacy-preserving federated tree learning.",
    )
    parser.add_argument("--version", action="version", version=f"securetrees {__version__}")
    logs = argparse.ArgumentParser(add_help=False)
    logs.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, default="INFO",
                      help="log records at this level and above to stderr (default INFO; DEBUG adds every message)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo", parents=[logs],
        help="run a demonstration on embedded data",
        description="Run a demonstration; extra arguments go to the demo (try NAME --help).",
    )
    demo.add_argument("name", nargs="?", help=f"which demo (default: {DEFAULT_DEMO})")
    demo.add_argument("demo_args", nargs=argparse.REMAINDER, help="arguments for the demo")
    demo.add_argument("--list", action="store_true", help="list the demos and exit")
    demo.set_defaults(func=_demo)

    party = sub.add_parser("party", parents=[logs], help="serve one role of a networked run (needs the net extra)",
                           description="Serve one role of the run described by --config until stopped.")
    party.add_argument("--config", required=True, help="the run's TOML configuration")
    party.add_argument("--role", required=True, help="which party of the roster this process is")
    party.add_argument("--passphrase-file", help="file holding the passphrase of this role's key files "
                       "(else $SECURETREES_PASSPHRASE, else a prompt)")
    _log_file_options(party)
    party.set_defaults(func=_party)

    op = sub.add_parser("operator", parents=[logs], help="drive a running federation (needs the net extra)",
                        description="As the run's operator, act on the roles started by 'securetrees party' "
                                    "on each machine: status, fit, resume (finish an interrupted fit from the parties' "
                                    "checkpoints), predict (to --out as CSV), revoke (RevFRF), "
                                    "stop (every role shuts down).")
    op.add_argument("action", choices=["status", "fit", "resume", "predict", "revoke", "stop"])
    op.add_argument("--config", required=True, help="the run's TOML configuration")
    op.add_argument("--passphrase-file", help="file holding the passphrase of the operator's key "
                    "(else $SECURETREES_PASSPHRASE, else a prompt)")
    op.add_argument("--out", help="predict: write the predictions to this CSV file")
    op.add_argument("--method", help="predict: the protocol's prediction method (RevFRF: vertical, test, "
                    "encrypted; Federated Forest: one-round, classical)")
    op.add_argument("--party", help="revoke: the participant that leaves")
    op.add_argument("--level", type=int, default=2, help="revoke: level 1 or 2 (default 2)")
    op.add_argument("--timeout", type=float,
                    help="seconds to wait for the roles to answer (default 30; status: per role, default 5)")
    _log_file_options(op)
    op.set_defaults(func=_operator)

    fed = sub.add_parser("federation", help="a whole federation on this machine, one process per role",
                         description="init: make a local trial on embedded Adult; launch: run it.")
    fed_sub = fed.add_subparsers(dest="fed_command", metavar="ACTION", required=True)
    init = fed_sub.add_parser("init", parents=[logs],
                              help="write a trial federation (certificates, keys, data, run.toml)")
    init.add_argument("protocol", help="a deployment registered as a securetrees.deployments entry point")
    init.add_argument("--out", required=True, help="folder to write the trial into")
    init.add_argument("--rows", type=int, default=1000, help="training rows of Adult (default 1000)")
    init.add_argument("--trees", type=int, default=5, help="number of trees (default 5)")
    init.add_argument("--insecure-1024", action="store_true",
                      help="1024-bit keys (faster, about 80-bit security; a trial only)")
    init.add_argument("--force", action="store_true",
                      help="overwrite an existing folder (its keys, certificates and passphrases are replaced)")
    init.set_defaults(func=_fed_init)
    launch = fed_sub.add_parser("launch", parents=[logs], help="start every role as a process, run the job, stop them")
    launch.add_argument("--config", required=True)
    launch.add_argument("--passphrase-dir", help="folder with NAME.pass files (default: pki/ beside the config)")
    launch.add_argument("--log-dir", help="folder of the roles' logs ROLE.log (default: logs/ beside the config)")
    launch.set_defaults(func=_fed_launch)
    add_setup_parser(sub, logs)
    return parser


def _log_file_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log-dir", help="write the log to ROLE.log in this folder (default: logs/ beside the config)")
    p.add_argument("--log-file", help="write (append) the log to this file instead")


def _log_file(args: argparse.Namespace) -> str | None:
    """Where ``party`` / ``operator`` log: ``--log-file``, else ``--log-dir``/ROLE.log (the folder made)."""
    if args.command not in ("party", "operator"):
        return None
    if args.log_file:
        return str(args.log_file)
    folder = Path(args.log_dir) if args.log_dir else Path(args.config).resolve().parent / "logs"
    private_dir(folder)
    return str(folder / f"{args.role if args.command == 'party' else 'operator'}.log")


def _net() -> object:
    try:
        import securetrees.net.service as service
    except ImportError as exc:  # grpcio missing
        raise SystemExit(f"securetrees: networked runs need the net extra: pip install 'securetrees[net]' ({exc})"
                         ) from None
    return service


def _party(args: argparse.Namespace) -> int:
    from securetrees.progress import log_lines

    log_lines()  # progress as lines in the role's log, which the operator's status also reads
    try:
        status: int = _net().serve(args.config, args.role, args.passphrase_file)  # type: ignore[attr-defined]
    finally:
        log_lines(False)
    return status


def _operator(args: argparse.Namespace) -> int:
    _net()
    from securetrees.net.config import load_config, read_passphrase
    from securetrees.net.operate import class_names, connect, perform, status, step_of, stop, write_csv
    from securetrees.net.service import job_module

    config = load_config(args.config)
    if args.action == "stop":
        asked = stop(config, args.passphrase_file, timeout=5.0 if args.timeout is None else args.timeout)
        print(f"stop: asked {', '.join(asked) or 'no role (none reachable)'} to shut down")
        return 0
    if args.action == "status":
        report = status(config, args.passphrase_file, timeout=5.0 if args.timeout is None else args.timeout)
        for role, info in report.items():
            details = ", ".join(f"{k} {v}" for k, v in info.items() if k != "reachable")
            state = "DOWN" if info["reachable"] != "yes" else "FAILED" if "failed" in info else "up"
            print(f"  {role}: {state}; {details}")
        return 0 if all(i["reachable"] == "yes" and "failed" not in i for i in report.values()) else 3
    timeout = 30.0 if args.timeout is None else args.timeout
    step_of(config, args.action, args.party)  # an action the protocol lacks is refused before connecting
    with connect(config, read_passphrase(config.operator, args.passphrase_file), config.roles, timeout) as op:
        result = perform(op, config, args.action, method=args.method, party=args.party, level=args.level,
                         on_progress=lambda line: print(f"{args.action}: {line}", file=sys.stderr, flush=True))
        # the predictions file's columns are named after the classes
        classes = class_names(op, config) if args.action == "predict" and args.out else ()
    kept = getattr(job_module(config), "PREDICTIONS_KEPT", None) if args.action == "predict" else None
    kept = kept(config) if callable(kept) else kept  # a deployment whose run's settings decide it
    if args.action != "predict" or kept is not None:
        print(f"{args.action}: " + ", ".join(f"{k} {v.tolist() if hasattr(v, 'tolist') else v}"
                                               for k, v in result.items()))
        if kept is not None:
            print(f"  {config.protocol}: {kept}; the operator receives no prediction"
                  + (f", so {args.out} is not written" if args.out else ""))
        return 0
    if args.out:
        for name, arr in result.items():
            print(f"  {name}: shape {arr.shape}")
        print(f"wrote {write_csv(args.out, result, classes)}")
    else:
        _print_first_rows(result)
    return 0


def _print_first_rows(results: dict[str, object]) -> None:
    import numpy as np

    for name, value in results.items():
        arr = np.asarray(value)
        if arr.ndim == 0:  # one figure (a party's score, the ε spent)
            print(f"  {name}: {arr.item()}")
            continue
        first = np.round(arr.reshape(arr.shape[0], -1)[:3, :], 4).tolist() if arr.ndim else arr.tolist()
        print(f"  {name}: shape {arr.shape}, first values {first}")


def _fed_init(args: argparse.Namespace) -> int:
    path = _net().init_trial(args.protocol, args.out, rows=args.rows,  # type: ignore[attr-defined]
                             trees=args.trees, insecure=args.insecure_1024, force=args.force)
    print(f"wrote {path}; run it with: securetrees federation launch --config {path}")
    return 0


def _fed_launch(args: argparse.Namespace) -> int:
    import time

    from securetrees.progress import phase

    service = _net()
    pdir = args.passphrase_dir or str(Path(args.config).resolve().parent / "pki")
    logs = Path(args.log_dir) if args.log_dir else service.default_log_dir(args.config)  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    with phase("federation (start every role, run the job, stop)"):
        results = service.launch(args.config, pdir, log_dir=logs)  # type: ignore[attr-defined]
    print(f"federation finished in {time.perf_counter() - t0:.1f} s (every role in its own process, mutual TLS); "
          f"the roles' logs are in {logs}")
    _print_first_rows(results)
    return 0


def _take_log_level(argv: list[str]) -> tuple[list[str], str | None]:
    """Remove ``--log-level X`` / ``--log-level=X`` from a demo's arguments; return the rest and X."""
    rest, level = [], None
    it = iter(argv)
    for a in it:
        if a == "--log-level":
            level = next(it, "")
        elif a.startswith("--log-level="):
            level = a.partition("=")[2]
        else:
            rest.append(a)
    return rest, level


def _writes_to(stream: object, path: str) -> bool:
    """Whether ``stream`` is the file ``path`` (a role started by ``spawn_role`` writes its output into
    its log): its error is then not printed again, nor into the log of a running copy that a
    refused second copy was given."""
    try:
        return os.path.samestat(os.fstat(stream.fileno()), os.stat(path))  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):  # no file behind it (a captured stream), or no such file
        return False


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "demo":  # ``demo NAME --log-level X``: the option is the command's, not the demo's
        args.demo_args, level = _take_log_level(list(args.demo_args))
        if level is not None:
            if level.upper() not in LOG_LEVELS:
                parser.error(f"--log-level must be one of {', '.join(LOG_LEVELS)}")
            args.log_level = level.upper()
    log_file = _log_file(args)
    configure_logging(args.log_level, file=log_file, exclusive=args.command == "party")
    try:
        status: int = args.func(args)
    except SecureTreesError as exc:
        if log_file is not None:  # the role's log ends with what ended it
            get_logger("cli").error("%s: %s", type(exc).__name__, exc)
        if log_file is None or not _writes_to(sys.stderr, log_file):  # (a spawned role's stderr is its log)
            print(f"securetrees: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        reset_logging()
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
