"""The run's certificate authority and the parties' certificates, as files (``securetrees setup``).

A real federation's PKI in four steps, each one organisation's, no tool but this library:

* :func:`make_ca`: the run's CA (or one organisation's own CA): ``ca.key`` (PKCS#8, encrypted under
  the CA's passphrase) and ``ca.pem``; the CA's SHA-256 fingerprint is what every roster entry it
  issues gives as ``issuer`` (:func:`securetrees.net.tls.bind_issuers`);
* :func:`make_request`: a party makes its own key (encrypted under its passphrase; it never leaves
  its machine) and a certificate signing request whose common name and one DNS name are its name;
* :func:`sign_request`: the CA checks the request (its signature, and CN = DNS SAN = one valid party
  name, else :class:`~securetrees.errors.CertificateRequestError`) and issues the certificate
  (:func:`securetrees.net.tls.party_certificate`, the same form the test PKI makes);
* :func:`issue`: for a party the CA's organisation hosts itself, key and certificate in one go.

Keys are ECDSA P-256.  Nothing here overwrites a file (:class:`~securetrees.errors.OutputExistsError`).
"""

from __future__ import annotations

import datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from securetrees.errors import CertificateRequestError, OutputExistsError, ParameterError
from securetrees.files import write_private
from securetrees.net.tls import (
    DEPLOYABLE_NAME,
    ca_certificate,
    check_name,
    encrypted_key,
    fingerprint,
    party_certificate,
)

__all__ = ["DEFAULT_DAYS", "issue", "load_ca", "make_ca", "make_request", "request_name", "sign_request"]

DEFAULT_DAYS = 365
"""Validity of the certificates these commands make, in days (``--days``)."""


def refuse_overwrite(*paths: Path) -> None:
    """:class:`OutputExistsError` naming every path of ``paths`` that exists."""
    taken = [str(p) for p in paths if p.exists()]
    if taken:
        raise OutputExistsError(f"refusing to overwrite {', '.join(taken)}")


def _write_public(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _days(days: int) -> datetime.timedelta:
    if not isinstance(days, int) or not 1 <= days <= 3650:
        raise ParameterError(f"certificate validity is 1 to 3650 days, got {days!r}")
    return datetime.timedelta(days=days)


def make_ca(out_dir: str | Path, passphrase: bytes, *, name: str = "securetrees run CA",
            days: int = DEFAULT_DAYS) -> tuple[Path, Path, str]:
    """Write ``ca.key`` (encrypted) and ``ca.pem`` into ``out_dir``; returns their paths and the
    CA's fingerprint (the ``issuer`` of the names it issues)."""
    if not name.strip() or len(name) > 64:
        raise ParameterError("the CA's name is 1 to 64 characters (an X.509 common name)")
    out = Path(out_dir)
    cert_path, key_path = out / "ca.pem", out / "ca.key"
    refuse_overwrite(cert_path, key_path)
    key = ec.generate_private_key(ec.SECP256R1())
    pem = encrypted_key(key, passphrase)
    cert = ca_certificate(key, name, validity=_days(days)).public_bytes(serialization.Encoding.PEM)
    write_private(key_path, pem)
    _write_public(cert_path, cert)
    return cert_path, key_path, fingerprint(cert)


def load_ca(cert_path: str | Path, key_path: str | Path, passphrase: bytes
            ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """The CA's certificate and key; :class:`ParameterError` for unreadable files, a wrong passphrase,
    a certificate that is not a CA, or a key that is not the certificate's."""
    try:
        cert = x509.load_pem_x509_certificate(Path(cert_path).read_bytes())
        raw = Path(key_path).read_bytes()
    except (OSError, ValueError) as exc:
        raise ParameterError(f"cannot read the CA's certificate or key: {exc}") from exc
    try:
        key = serialization.load_pem_private_key(raw, password=passphrase)
    except (ValueError, TypeError) as exc:
        raise ParameterError("cannot open the CA's key (wrong passphrase?)") from exc
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    if not is_ca or not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ParameterError(f"{cert_path} is not a CA certificate with an EC key")
    if key.public_key().public_numbers() != cert.public_key().public_numbers():  # type: ignore[union-attr]
        raise ParameterError(f"{key_path} is not the key of {cert_path}")
    return cert, key


def make_request(name: str, out_dir: str | Path, passphrase: bytes) -> tuple[Path, Path]:
    """A party's own key ``NAME.key`` (encrypted) and request ``NAME.csr`` (CN = DNS SAN = ``name``)."""
    check_name(name)
    out = Path(out_dir)
    key_path, csr_path = out / f"{name}.key", out / f"{name}.csr"
    refuse_overwrite(key_path, csr_path)
    key = ec.generate_private_key(ec.SECP256R1())
    pem = encrypted_key(key, passphrase)
    csr = (x509.CertificateSigningRequestBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
           .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
           .sign(key, hashes.SHA256()))
    write_private(key_path, pem)
    _write_public(csr_path, csr.public_bytes(serialization.Encoding.PEM))
    return key_path, csr_path


ALLOWED_CURVES: tuple[type[ec.EllipticCurve], ...] = (ec.SECP256R1, ec.SECP384R1)
"""The curves a party's key may use (NIST P-256, P-384)."""


def request_name(csr: x509.CertificateSigningRequest) -> str:
    """The party name a request asks for: its one CN, equal to its one subject-alternative name,
    which is a DNS name and a valid party name; the request carries no other extension (a CA flag,
    key usages: the CA decides those) and a P-256 or P-384 key.  :class:`CertificateRequestError`
    otherwise, or when its signature does not verify."""
    if not csr.is_signature_valid:
        raise CertificateRequestError("the request's signature does not verify")
    others = [ext.oid.dotted_string for ext in csr.extensions if not isinstance(ext.value, x509.SubjectAlternativeName)]
    if others:
        raise CertificateRequestError(f"the request carries extensions the CA does not take from a request: {others} "
                                      "(only the subject-alternative name)")
    cns = [str(a.value) for a in csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    try:
        general = list(csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except x509.ExtensionNotFound:
        general = []
    if any(not isinstance(g, x509.DNSName) for g in general):
        raise CertificateRequestError("the request's subject-alternative names must be DNS names only")
    sans = [str(g.value) for g in general]
    if len(cns) != 1 or sans != cns:
        raise CertificateRequestError(f"the request's common name {cns} and DNS names {sans} must be one and "
                                      "the same party name")
    if not DEPLOYABLE_NAME.match(cns[0]):
        raise CertificateRequestError(f"{cns[0]!r} is not a party name (one lower-case DNS label)")
    public = csr.public_key()
    if not isinstance(public, ec.EllipticCurvePublicKey) or not isinstance(public.curve, ALLOWED_CURVES):
        raise CertificateRequestError("the request's key is not an EC key on P-256 or P-384")
    return cns[0]


def sign_request(csr_path: str | Path, expect: str, ca_cert: str | Path, ca_key: str | Path, ca_passphrase: bytes,
                 out: str | Path | None = None, *, days: int = DEFAULT_DAYS) -> tuple[Path, str, str]:
    """Issue the certificate a request asks for, if it asks for party ``expect`` (the CA names the
    party it signs for, so a request for another name, say ``operator``, is refused); writes
    ``NAME.crt`` beside the request unless ``out``; returns its path, the party's name and the CA's
    fingerprint (the entry's ``issuer``).  The certificate ends no later than the CA's."""
    validity = _days(days)
    check_name(expect)
    try:
        csr = x509.load_pem_x509_csr(Path(csr_path).read_bytes())
    except (OSError, ValueError) as exc:
        raise CertificateRequestError(f"cannot read a certificate signing request from {csr_path}: {exc}") from exc
    name = request_name(csr)
    if name != expect:
        raise CertificateRequestError(f"the request asks for {name!r}, not {expect!r} (the party the CA signs for)")
    public = csr.public_key()
    if not isinstance(public, ec.EllipticCurvePublicKey):  # pragma: no cover - request_name checked it
        raise CertificateRequestError("the request's key is not an EC key")
    cert_path = Path(out) if out is not None else Path(csr_path).with_name(f"{name}.crt")
    refuse_overwrite(cert_path)
    cacert, cakey = load_ca(ca_cert, ca_key, ca_passphrase)
    cert = party_certificate(name, public, cacert, cakey, validity=_within(cacert, validity))
    _write_public(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, name, fingerprint(cacert.public_bytes(serialization.Encoding.PEM))


def _within(cacert: x509.Certificate, validity: datetime.timedelta) -> datetime.timedelta:
    """``validity`` cut so that a certificate issued now ends no later than its CA."""
    left = cacert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)
    if left <= datetime.timedelta(0):
        raise ParameterError("the CA's certificate has expired")
    return min(validity, left)


def issue(name: str, out_dir: str | Path, ca_cert: str | Path, ca_key: str | Path, ca_passphrase: bytes,
          passphrase: bytes, *, days: int = DEFAULT_DAYS) -> tuple[Path, Path]:
    """Key (encrypted under ``passphrase``) and certificate of a party the CA's organisation hosts:
    ``NAME.key`` and ``NAME.crt`` in ``out_dir``."""
    check_name(name)
    validity = _days(days)
    out = Path(out_dir)
    cert_path, key_path = out / f"{name}.crt", out / f"{name}.key"
    refuse_overwrite(cert_path, key_path)
    cacert, cakey = load_ca(ca_cert, ca_key, ca_passphrase)
    key = ec.generate_private_key(ec.SECP256R1())
    pem = encrypted_key(key, passphrase)
    cert = party_certificate(name, key.public_key(), cacert, cakey, validity=_within(cacert, validity))
    write_private(key_path, pem)
    _write_public(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path
