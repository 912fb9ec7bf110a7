"""``securetrees setup ...``: each step an organisation takes to set up a networked run, one command each.

========================  ==============================================================================
``setup example``          copy the three organisations' example CSV files (README, "Your own data")
``setup ca``               the run's CA (or an organisation's own): ``ca.key`` (encrypted) and ``ca.pem``
``setup request``          a party's own key (encrypted) and certificate signing request
``setup sign``             the CA signs a request; prints the ``issuer`` fingerprint for the roster
``setup issue``            the CA makes key and certificate for parties its organisation hosts
``setup keys``             a party's protocol key material, sealed in its key file (Paillier holders)
``setup kgc``              RevFRF's KGC: every party's sealed key file and the public directory
``setup run``              ``run.toml``: the roster, ``[protocol]``, each name's issuer, checked (key material too)
========================  ==============================================================================

Passphrases are never arguments: ``--passphrase-file``, else ``$SECURETREES_PASSPHRASE``, else a
prompt (:func:`securetrees.net.config.read_passphrase`).  Nothing is overwritten without ``--force``.
"""

from __future__ import annotations

import argparse
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from securetrees.errors import OutputExistsError, ParameterError

__all__ = ["add_setup_parser"]


def add_setup_parser(sub: Any, logs: argparse.ArgumentParser) -> None:
    """The ``setup`` command group under the ``securetrees`` parser's subcommands ``sub``."""
    setup = sub.add_parser("setup", help="set up a networked run across organisations, one step per command",
                           description="Set-up steps of a networked run (needs the net extra); each step is "
                                       "what one organisation does. See specs/deployment.md, 'Across machines'.")
    steps = setup.add_subparsers(dest="setup_command", metavar="STEP", required=True)

    def step(name: str, help_: str) -> argparse.ArgumentParser:
        return steps.add_parser(name, parents=[logs], help=help_, description=help_)  # type: ignore[no-any-return]

    def passphrase(p: argparse.ArgumentParser, whose: str, flag: str = "--passphrase-file") -> None:
        p.add_argument(flag, help=f"file holding {whose} passphrase (else $SECURETREES_PASSPHRASE, else a prompt)")

    ex = step("example", "copy the example: three organisations' CSV tables and their new rows to predict")
    ex.add_argument("--out", required=True, help="folder to copy them into")
    ex.add_argument("--force", action="store_true", help="overwrite files of the same names")
    ex.set_defaults(func=_example)

    ca = step("ca", "make the run's certificate authority: ca.key (encrypted) and ca.pem")
    ca.add_argument("--out", required=True, help="folder to write ca.key and ca.pem into")
    ca.add_argument("--name", default="securetrees run CA", help="the CA's common name")
    ca.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    passphrase(ca, "the CA key's")
    ca.set_defaults(func=_ca)

    req = step("request", "make a party's own key (encrypted) and certificate signing request NAME.csr")
    req.add_argument("--name", required=True, help="the party's name (one lower-case DNS label)")
    req.add_argument("--out", required=True, help="folder to write NAME.key and NAME.csr into")
    passphrase(req, "the party key's")
    req.set_defaults(func=_request)

    sign = step("sign", "as the CA, sign a party's request: NAME.crt; prints the issuer fingerprint")
    sign.add_argument("--csr", required=True, help="the party's NAME.csr")
    sign.add_argument("--name", required=True,
                      help="the party the CA signs for: a request that asks for another name is refused")
    sign.add_argument("--ca-cert", required=True, help="the CA's certificate (ca.pem)")
    sign.add_argument("--ca-key", required=True, help="the CA's key (ca.key)")
    sign.add_argument("--out", help="where to write the certificate (default NAME.crt beside the request)")
    sign.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    passphrase(sign, "the CA key's")
    sign.set_defaults(func=_sign)

    iss = step("issue", "as the CA, make key and certificate for parties its organisation hosts")
    iss.add_argument("--name", required=True, nargs="+", help="the parties' names")
    iss.add_argument("--ca-cert", required=True, help="the CA's certificate (ca.pem)")
    iss.add_argument("--ca-key", required=True, help="the CA's key (ca.key)")
    iss.add_argument("--out", required=True, help="folder to write NAME.key and NAME.crt into")
    iss.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    passphrase(iss, "the CA key's")
    passphrase(iss, "the parties' keys'", "--party-passphrase-file")
    iss.set_defaults(func=_issue)

    keys = step("keys", "make a party's protocol key pair and seal it into its key file "
                        "(Federated Forest's label holder, SecureBoost's active party, HybridTree's host)")
    keys.add_argument("protocol", help="federated-forest, secureboost or hybridtree (histogram-forest: a checkpoint "
                      "key alone, --no-paillier --checkpoint-key)")
    keys.add_argument("--party", required=True, help="the party's name")
    keys.add_argument("--out", required=True, help="its key file (e.g. keys/NAME.keys)")
    keys.add_argument("--public-out", help="where to write the public [protocol] parameters "
                      "(default NAME.public.toml beside the key file)")
    keys.add_argument("--key-bits", type=int, default=2048, help="Paillier modulus bits (default 2048)")
    keys.add_argument("--insecure-1024", action="store_true",
                      help="a 1024-bit key (about 80-bit security; a trial only): sets allow_insecure")
    keys.add_argument("--checkpoint-key", action="store_true",
                      help="add a checkpoint key (Federated Forest, SecureBoost, HybridTree)")
    keys.add_argument("--no-paillier", action="store_true", help="no Paillier key (a checkpoint key alone)")
    keys.add_argument("--force", action="store_true", help="replace existing files")
    passphrase(keys, "the party's")
    keys.set_defaults(func=_keys)

    kgc = step("kgc", "RevFRF's key generation centre: every party's sealed key file and the public directory")
    kgc.add_argument("--participants", required=True, nargs="+", help="the participants' names (u1 u2 ...)")
    kgc.add_argument("--requesters", nargs="*", default=[],
                     help="the requesters' names (default none; a requester needs its key file from this step)")
    kgc.add_argument("--passphrase-dir", required=True,
                     help="folder with each party's NAME.pass (cs, cc, kgc, participants, requesters)")
    kgc.add_argument("--out", required=True, help="folder to write NAME.keys into")
    kgc.add_argument("--public-out", help="the public [protocol] parameters (default revfrf.public.toml in --out)")
    kgc.add_argument("--key-bits", type=int, default=2048, help="DT-PKC modulus bits (default 2048)")
    kgc.add_argument("--insecure-1024", action="store_true", help="1024-bit keys (a trial only)")
    kgc.add_argument("--checkpoint-key", action="store_true",
                     help="a checkpoint_key in the CS's and each participant's key file ([protocol] checkpoint_dir)")
    kgc.add_argument("--force", action="store_true", help="replace existing files")
    kgc.set_defaults(func=_kgc)

    run = step("run", "write run.toml: the roster (each name bound to its CA), [protocol], the non-collusion "
                      "assumption; checked before it is written (a run lacking the key material its protocol "
                      "needs is refused, naming the setup keys / setup kgc command that makes it)")
    run.add_argument("protocol", help="a deployment (securetrees.deployments entry point)")
    run.add_argument("--out", required=True, help="the run.toml to write (paths below are relative to its folder)")
    run.add_argument("--ca", required=True, nargs="+",
                     help="the CA certificate(s); several are concatenated into --bundle")
    run.add_argument("--bundle", default="pki/ca-bundle.pem", help="the bundle to write when --ca names several")
    run.add_argument("--party", required=True, action="append", metavar="SPEC",
                     help="name=N,role=R,address=HOST:PORT,organisation=O[,data=F,test_data=F,id_column=C,"
                          "label=C,features=C1:C2:...|drop=C1:C2:...,secrets=F,cert=F,key=F,ca=F]; repeat per "
                          "party, the operator too; features lists the columns the party uses, drop those it "
                          "ignores (default: every column but the id and the label)")
    run.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                     help="a [protocol] parameter (VALUE in TOML syntax, else a string); repeatable")
    run.add_argument("--params", action="append", default=[], metavar="FILE",
                     help="[protocol] parameters from a TOML file (e.g. setup keys' public output); repeatable")
    run.add_argument("--operator", default="operator", help="the operator's name (default operator)")
    run.add_argument("--deadline", type=float, default=600.0,
                     help="seconds per call, [transport] deadline (default 600)")
    run.add_argument("--force", action="store_true", help="replace an existing run.toml")
    run.set_defaults(func=_run)


def _pass(whose: str, file: str | None) -> bytes:
    from securetrees.net.config import read_passphrase

    return read_passphrase(whose, file)


def _example(args: argparse.Namespace) -> int:
    from securetrees.testing.example_tables import EXAMPLE_FILES

    out = Path(args.out)
    source = resources.files("securetrees") / "data" / "example"
    taken = [n for n in EXAMPLE_FILES if (out / n).exists()]
    if taken and not args.force:
        raise OutputExistsError(f"refusing to overwrite {', '.join(taken)} in {out} (--force replaces them)")
    out.mkdir(parents=True, exist_ok=True)
    for name in EXAMPLE_FILES:
        with resources.as_file(source / name) as src:
            shutil.copyfile(src, out / name)
    print(f"wrote {', '.join(EXAMPLE_FILES)} into {out}")
    return 0


def _ca(args: argparse.Namespace) -> int:
    from securetrees.net.pki import make_ca

    cert, key, fp = make_ca(args.out, _pass("the CA", args.passphrase_file), name=args.name, days=args.days)
    print(f"wrote {cert} and {key} (encrypted)\nissuer = \"{fp}\"")
    return 0


def _request(args: argparse.Namespace) -> int:
    from securetrees.net.pki import make_request

    key, csr = make_request(args.name, args.out, _pass(args.name, args.passphrase_file))
    print(f"wrote {key} (encrypted; it stays here) and {csr} (send it to the run's CA)")
    return 0


def _sign(args: argparse.Namespace) -> int:
    from securetrees.net.pki import sign_request

    cert, name, fp = sign_request(args.csr, args.name, args.ca_cert, args.ca_key, _pass("the CA", args.passphrase_file),
                                  args.out, days=args.days)
    print(f"wrote {cert} for {name}\nissuer = \"{fp}\"")
    return 0


def _issue(args: argparse.Namespace) -> int:
    from securetrees.net.pki import issue, refuse_overwrite
    from securetrees.net.tls import check_name, fingerprint

    ca_pass = _pass("the CA", args.passphrase_file)
    party_pass = _pass("the parties", args.party_passphrase_file)
    out = Path(args.out)
    for name in args.name:  # every name checked before any is issued: all or nothing
        check_name(name)
    refuse_overwrite(*(out / f"{n}.{ext}" for n in args.name for ext in ("crt", "key")))
    for name in args.name:
        cert, key = issue(name, args.out, args.ca_cert, args.ca_key, ca_pass, party_pass, days=args.days)
        print(f"wrote {cert} and {key} (encrypted)")
    print(f"issuer = \"{fingerprint(Path(args.ca_cert).read_bytes())}\"")
    return 0


def _keys(args: argparse.Namespace) -> int:
    from securetrees.net.keysetup import paillier_keys, write_public

    bits = 1024 if args.insecure_1024 else args.key_bits
    out = Path(args.out)
    public_out = Path(args.public_out) if args.public_out else out.with_name(f"{args.party}.public.toml")
    if public_out.exists() and not args.force:
        raise OutputExistsError(f"refusing to overwrite {public_out} (--force replaces it)")
    params = paillier_keys(args.protocol, args.party, out, _pass(args.party, args.passphrase_file), bits=bits,
                           allow_insecure=args.insecure_1024, checkpoint_key=args.checkpoint_key,
                           paillier=not args.no_paillier, force=args.force)
    write_public(public_out, params, force=True)
    print(f"wrote {out} (sealed) and {public_out} (public; give it to setup run --params)")
    return 0


def _kgc(args: argparse.Namespace) -> int:
    from securetrees import plugins
    from securetrees.net.config import read_passphrase
    from securetrees.net.keysetup import write_public

    module = plugins.load_deployment("revfrf")
    setup_keys = getattr(module, "write_key_files", None)
    if not callable(setup_keys):
        raise ParameterError("this install's RevFRF deployment offers no KGC set-up (write_key_files)")
    bits = 1024 if args.insecure_1024 else args.key_bits
    out = Path(args.out)
    public_out = Path(args.public_out) if args.public_out else out / "revfrf.public.toml"
    names = ["cs", "cc", "kgc", *args.participants, *args.requesters]
    taken = [str(p) for p in [public_out, *(out / f"{n}.keys" for n in names)] if p.exists()]
    if taken and not args.force:
        raise OutputExistsError(f"refusing to overwrite {', '.join(taken)} (--force replaces them)")
    passphrases = {n: read_passphrase(n, Path(args.passphrase_dir) / f"{n}.pass") for n in names}
    params = setup_keys(out, list(args.participants), list(args.requesters), passphrases, key_bits=bits,
                        allow_insecure=args.insecure_1024, checkpoint_key=args.checkpoint_key)
    write_public(public_out, params, force=True)
    print(f"wrote {len(names)} sealed key files into {out} (hand each party its own) and {public_out} (public)")
    return 0


def _run(args: argparse.Namespace) -> int:
    from securetrees.net.runfile import build_run, parse_param, parse_party, party_features, read_params, write_run

    out = Path(args.out)
    base = out.resolve().parent
    if len(args.ca) == 1:
        bundle = args.ca[0]
    else:
        target = base / args.bundle
        if target.exists() and not args.force:
            raise OutputExistsError(f"refusing to overwrite {target} (--force replaces it)")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            certs = b"".join((base / c).read_bytes() for c in args.ca)
        except OSError as exc:
            raise ParameterError(f"cannot read a CA certificate: {exc}") from None
        target.write_bytes(certs)
        bundle = args.bundle
    params: dict[str, Any] = {}
    for f in args.params:
        params.update(read_params(base / f))
    params.update(dict(parse_param(p) for p in args.param))
    parties = [parse_party(s, operator=args.operator) for s in args.party]
    features = party_features(args.protocol, parties, base, params)
    doc = build_run(args.protocol, parties, ca_bundle=bundle, base=base, params=params, operator=args.operator,
                    transport={"deadline": args.deadline}, features=features)
    path = write_run(out, doc, force=args.force)
    print(f"wrote {path}: {len(parties)} parties; give every party this same file")
    for name, used in features.items():
        if used is None:
            print(f"  {name}: its data file is not on this machine; its role checks its columns when it starts")
        else:
            print(f"  {name} uses {len(used)} feature column{'' if len(used) == 1 else 's'}: "
                  f"{', '.join(used) or '(none)'}")
    return 0
