"""Certificates for mutual TLS between the parties of a run.

A party's identity is its certificate: the subject common name and the one
DNS subject-alternative name are the party's name, and the certificate is
signed directly by one certificate authority of the run's bundle (``ca.pem``,
one CA or several, e.g. one per organisation).  :func:`bind_issuers` ties each
roster name to the one CA allowed to issue it, so that no organisation's CA can
mint another party's name.  :func:`make_test_pki` makes a CA and one
certificate per party for local trials (ECDSA P-256, 30 days); real
deployments bring certificates from their own CA (``specs/deployment.md``),
and :func:`load_identity` checks either kind the same way.

Private keys are written only encrypted under a passphrase (PKCS#8 with the
best encryption pyca/cryptography offers) and decrypted in memory when a party
starts; :class:`TlsIdentity`'s repr shows no key material.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from securetrees.errors import AuthenticationError, ParameterError
from securetrees.files import write_private

__all__ = ["DEPLOYABLE_NAME", "TlsIdentity", "bind_issuers", "ca_certificate", "check_fingerprint", "encrypted_key",
           "fingerprint", "issued_by", "load_ca_bundle", "load_identity", "make_test_pki", "party_certificate"]

DEPLOYABLE_NAME: Final = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
"""Names a networked party may have: one DNS label (the certificate's subject alternative name)."""

_VALIDITY: Final = datetime.timedelta(days=30)


def check_name(name: str) -> str:
    if not isinstance(name, str) or not DEPLOYABLE_NAME.match(name):
        raise ParameterError(f"a networked party name is one lower-case DNS label, got {name!r}")
    return name


@dataclass(frozen=True)
class TlsIdentity:
    """What a party presents and trusts: the CA bundle, its own certificate, its key (PEM)."""

    name: str
    ca_pem: bytes = field(repr=False)
    cert_pem: bytes = field(repr=False)
    key_pem: bytes = field(repr=False)

    def __repr__(self) -> str:
        return f"TlsIdentity({self.name!r}, fingerprint={fingerprint(self.cert_pem)[:16]}…)"


def fingerprint(cert_pem: bytes) -> str:
    """SHA-256 of the certificate's DER encoding, hex (what a roster may pin)."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    return cert.fingerprint(hashes.SHA256()).hex()


def check_fingerprint(value: str, what: str) -> str:
    """A SHA-256 fingerprint as 64 lower-case hex digits; accepts upper case and ``AB:CD:…``
    (``openssl x509 -noout -fingerprint -sha256``).  :class:`ParameterError` otherwise."""
    if not isinstance(value, str):
        raise ParameterError(f"{what} must be a SHA-256 fingerprint string")
    hex_ = value.replace(":", "").strip().lower()
    if len(hex_) != 64 or any(c not in "0123456789abcdef" for c in hex_):
        raise ParameterError(f"{what} must be a SHA-256 fingerprint (64 hex digits), got {value!r}")
    return hex_


def load_ca_bundle(ca_pem: bytes) -> list[x509.Certificate]:
    """Every CA certificate of a bundle (PEM blocks one after the other), duplicates dropped.

    Raises :class:`ParameterError` for an empty or malformed bundle, or a certificate in it that
    is not a CA (basic constraints ``CA:TRUE``).
    """
    try:
        certs = x509.load_pem_x509_certificates(ca_pem)
    except ValueError as exc:
        raise ParameterError("the CA bundle holds no readable PEM certificate") from exc
    cas: dict[bytes, x509.Certificate] = {}
    for cert in certs:
        try:
            is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        except x509.ExtensionNotFound:
            is_ca = False
        if not is_ca:
            raise ParameterError(f"the CA bundle holds a certificate that is not a CA: {cert.subject.rfc4514_string()}")
        cas.setdefault(cert.fingerprint(hashes.SHA256()), cert)
    return list(cas.values())


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """Whether ``ca`` signed ``cert`` directly (issuer name and signature; no chain)."""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def bind_issuers(ca_pem: bytes, issuers: Mapping[str, str | None]) -> dict[str, x509.Certificate]:
    """Each roster name's CA: the one certificate authority allowed to issue that name.

    ``issuers`` maps every name to the SHA-256 fingerprint of its CA in the bundle, or to
    ``None``.  With one CA in the bundle, ``None`` means that CA (a run with one CA needs
    nothing more).  With several, any of them could mint any name, so every name must
    name its CA.  A pinned certificate fingerprint is no substitute: the server side checks
    a pin, but gRPC's client does not expose the server's certificate, so an outgoing
    connection is bound only by trusting that one CA as its root.

    Raises :class:`ParameterError` (at start-up) when the bundle has several CAs and a name
    has none, or a fingerprint names no CA of the bundle.
    """
    cas = load_ca_bundle(ca_pem)
    by_fp = {c.fingerprint(hashes.SHA256()).hex(): c for c in cas}
    bound: dict[str, x509.Certificate] = {}
    unbound: list[str] = []
    for name, issuer in issuers.items():
        if issuer is None:
            if len(cas) == 1:
                bound[name] = cas[0]
            else:
                unbound.append(name)
            continue
        ca = by_fp.get(check_fingerprint(issuer, f"the issuer of {name!r}"))
        if ca is None:
            raise ParameterError(f"the issuer of {name!r} ({issuer}) is not a CA of the run's bundle")
        bound[name] = ca
    if unbound:
        raise ParameterError(
            f"the CA bundle holds {len(cas)} CAs, so each of them could issue any name: every roster entry "
            f"must give its issuer (the SHA-256 fingerprint of the CA allowed to issue it; a pinned "
            f"certificate alone does not bind outgoing connections); missing for {sorted(unbound)}")
    return bound


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _encrypted(key: ec.EllipticCurvePrivateKey, passphrase: bytes) -> bytes:
    if not passphrase:
        raise ParameterError("the key passphrase must not be empty")
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.BestAvailableEncryption(passphrase))


def ca_certificate(key: ec.EllipticCurvePrivateKey, name: str, *,
                   validity: datetime.timedelta = _VALIDITY) -> x509.Certificate:
    """A self-signed CA certificate for ``key`` (signs party certificates only: path length 0)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(name)).issuer_name(_name(name))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )


def party_certificate(name: str, public_key: ec.EllipticCurvePublicKey, ca_cert: x509.Certificate,
                      ca_key: ec.EllipticCurvePrivateKey, *,
                      validity: datetime.timedelta = _VALIDITY) -> x509.Certificate:
    """The certificate of party ``name`` (CN and the one DNS SAN: the name; TLS server and client
    use), signed directly by the CA."""
    check_name(name)
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(name)).issuer_name(ca_cert.subject)
        .public_key(public_key).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + validity)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                              ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def encrypted_key(key: ec.EllipticCurvePrivateKey, passphrase: bytes) -> bytes:
    """``key`` as PKCS#8 PEM under ``passphrase`` (the best encryption pyca/cryptography offers)."""
    return _encrypted(key, passphrase)


def make_test_pki(names: list[str], out_dir: str | Path, passphrases: dict[str, bytes],
                  *, ca_name: str = "securetrees test CA") -> dict[str, tuple[Path, Path]]:
    """A fresh CA (``ca.pem``; its key is discarded) and, for each name, ``NAME.crt`` and
    ``NAME.key`` (encrypted under ``passphrases[NAME]``).  Returns ``{name: (cert, key)}``.

    For local trials and tests only: a real federation's CA is kept by whoever runs it
    (``securetrees setup ca``, :mod:`securetrees.net.pki`).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = ca_certificate(ca_key, ca_name)
    (out / "ca.pem").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths: dict[str, tuple[Path, Path]] = {}
    for name in names:
        check_name(name)
        key = ec.generate_private_key(ec.SECP256R1())
        cert = party_certificate(name, key.public_key(), ca_cert, ca_key)
        cert_path, key_path = out / f"{name}.crt", out / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        write_private(key_path, _encrypted(key, passphrases[name]))
        paths[name] = (cert_path, key_path)
    return paths


def load_identity(name: str, ca_path: str | Path, cert_path: str | Path, key_path: str | Path,
                  passphrase: bytes) -> TlsIdentity:
    """Read and check a party's TLS identity.

    ``ca_path`` is the run's CA bundle (one CA or several).  Raises :class:`AuthenticationError`
    when the certificate is not for ``name``, not signed directly by a CA of the bundle, or not
    currently valid, or the key does not match it; :class:`ParameterError`
    for a wrong passphrase or unreadable files.
    """
    check_name(name)
    try:
        ca_pem, cert_pem, key_enc = (Path(p).read_bytes() for p in (ca_path, cert_path, key_path))
    except OSError as exc:
        raise ParameterError(f"cannot read the TLS files of {name!r}: {exc}") from exc
    cas = load_ca_bundle(ca_pem)
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError as exc:
        raise ParameterError(f"malformed certificate for {name!r}") from exc
    try:
        key = serialization.load_pem_private_key(key_enc, password=passphrase)
    except (ValueError, TypeError) as exc:
        raise ParameterError(f"cannot open the TLS key of {name!r} (wrong passphrase?)") from exc
    if not any(issued_by(cert, ca) for ca in cas):
        raise AuthenticationError(f"the certificate of {name!r} is not signed by a CA of the run's bundle")
    cns = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if cns != [name]:
        raise AuthenticationError(f"the certificate is for {cns!r}, not {name!r}")
    now = datetime.datetime.now(datetime.timezone.utc)
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        raise AuthenticationError(f"the certificate of {name!r} is not valid now")
    own = cert.public_key().public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)
    if key.public_key().public_bytes(serialization.Encoding.DER,
                                     serialization.PublicFormat.SubjectPublicKeyInfo) != own:
        raise AuthenticationError(f"the TLS key of {name!r} does not match its certificate")
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return TlsIdentity(name, ca_pem, cert_pem, key_pem)
