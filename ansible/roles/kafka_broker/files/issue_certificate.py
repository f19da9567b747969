"""The site's TLS for the embedded broker, made on the controller when the inventory gives
none: a CA (kept, so clients keep trusting it across runs) and one certificate per broker
host, naming the host's cluster address, signed by that CA.

Runs with the controller's Python (ansible-core's own dependency ``cryptography``; no
Galaxy collection is needed). Idempotent, so the play can run it on every pass: an existing
file is kept while it is still right, and the one JSON line on stdout says whether
anything was written (Ansible's ``changed_when``) and why.

    python issue_certificate.py ca --cert CA.pem --key CA.key
    python issue_certificate.py leaf --ca-cert CA.pem --ca-key CA.key \\
        --cert HOST.pem --key HOST.key --name HOST --san IP:10.0.0.12 --san DNS:HOST

A leaf is issued again when it is missing, unreadable, not signed by this CA, names other
subject alternative names, or expires within ``RENEW_DAYS``. Private keys are written mode
0600. Exit 2 with one line naming the file when a given file cannot be used.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import json
import os
import sys
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
LEAF_DAYS = 825
RENEW_DAYS = 30


class Unusable(Exception):
    """A given file cannot be used; the message names it."""


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _write(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(tmp, mode)
    tmp.replace(path)


def _key_bytes(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _load_cert(path: Path) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise Unusable(f"{path}: not a PEM certificate ({exc})") from None


def _load_key(path: Path):
    try:
        return serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise Unusable(f"{path}: not an unencrypted PEM private key ({exc})") from None


def _sans(values: list[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for value in values:
        kind, _, name = value.partition(":")
        if kind == "IP":
            out.append(x509.IPAddress(ipaddress.ip_address(name)))
        elif kind == "DNS" and name:
            out.append(x509.DNSName(name))
        else:
            raise Unusable(f"--san: {value!r} is not IP:<address> or DNS:<name>")
    return out


def ensure_ca(cert_path: Path, key_path: Path, name: str) -> str | None:
    """Make the CA unless both files exist; the reason it was written, or None."""
    if cert_path.exists() and key_path.exists():
        _load_cert(cert_path)
        _load_key(key_path)
        return None
    if cert_path.exists() != key_path.exists():
        present = cert_path if cert_path.exists() else key_path
        raise Unusable(f"{present}: exists without its pair; move it away or give both")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = _now()
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    _write(key_path, _key_bytes(key), 0o600)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return "a new CA"


def _leaf_problem(cert_path: Path, key_path: Path, ca: x509.Certificate,
                  sans: list[x509.GeneralName]) -> str | None:
    """Why the existing leaf must be issued again, or None when it is still right."""
    if not cert_path.exists() or not key_path.exists():
        return "missing"
    try:
        cert = _load_cert(cert_path)
        key = _load_key(key_path)
    except Unusable as exc:
        return str(exc)
    if cert.public_key().public_numbers() != key.public_key().public_numbers():
        return "the key does not match the certificate"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "not signed by this CA"
    try:
        named = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "no subject alternative names"
    if set(named) != set(sans):
        return "other subject alternative names"
    if cert.not_valid_after_utc - _now() < datetime.timedelta(days=RENEW_DAYS):
        return f"expires within {RENEW_DAYS} days"
    return None


def ensure_leaf(ca_cert: Path, ca_key: Path, cert_path: Path, key_path: Path, name: str,
                san_values: list[str]) -> str | None:
    ca = _load_cert(ca_cert)
    signer = _load_key(ca_key)
    sans = _sans(san_values)
    problem = _leaf_problem(cert_path, key_path, ca, sans)
    if problem is None:
        return None
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=LEAF_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                signer.public_key()), critical=False)
            .sign(signer, hashes.SHA256()))
    _write(key_path, _key_bytes(key), 0o600)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return problem


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="issue_certificate.py")
    sub = parser.add_subparsers(dest="what", required=True)
    ca = sub.add_parser("ca")
    ca.add_argument("--cert", type=Path, required=True)
    ca.add_argument("--key", type=Path, required=True)
    ca.add_argument("--name", default="appliance site CA")
    leaf = sub.add_parser("leaf")
    leaf.add_argument("--ca-cert", type=Path, required=True)
    leaf.add_argument("--ca-key", type=Path, required=True)
    leaf.add_argument("--cert", type=Path, required=True)
    leaf.add_argument("--key", type=Path, required=True)
    leaf.add_argument("--name", required=True)
    leaf.add_argument("--san", action="append", default=[])
    args = parser.parse_args(argv)
    try:
        if args.what == "ca":
            reason = ensure_ca(args.cert, args.key, args.name)
        else:
            reason = ensure_leaf(args.ca_cert, args.ca_key, args.cert, args.key, args.name,
                                 args.san)
    except Unusable as exc:
        print(f"issue_certificate: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"changed": reason is not None, "reason": reason or "kept"}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
