"""Test-time TLS material and broker users for the security tests.

Certificates are made fresh for every test session (``cryptography``): a throw-away CA and
a broker certificate for ``localhost`` / ``127.0.0.1`` signed by it. No private key is
ever committed; keys are written with mode 0600, as the broker demands.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from appliance.broker.security.credentials import add_user
from appliance.process.cpu_affinity import tree

# The user the clients log in as. The password is random per session and distinctive, so
# the secret-leak test can search for it anywhere.
USER = "appliance-client"


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # CA certificate (PEM): the clients' truststore
    cert: Path  # broker certificate (PEM)
    key: Path  # broker private key (PEM, 0600)
    client_cert: Path  # a client certificate signed by the same CA (mutual TLS)
    client_key: Path


def write_private(path: Path, data: str | bytes) -> Path:
    """``data`` into ``path``, readable by its owner only from its creation (0600): keys,
    and settings files that hold or point at a secret."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # a file that was there keeps its mode through O_CREAT
    with os.fdopen(fd, "wb") as fh:
        fh.write(data.encode() if isinstance(data, str) else data)
    return path


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def make_tls(directory: Path, names: tuple[str, ...] = ("localhost", "127.0.0.1")) -> TlsFiles:
    """A CA, a broker certificate for ``names`` (host names and addresses) and a client
    certificate, all signed by that CA."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "appliance test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                       crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False,
                                       decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([_san(n) for n in names]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = (x509.CertificateBuilder()
              .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "client")]))
              .issuer_name(ca_name).public_key(client_key.public_key())
              .serial_number(x509.random_serial_number())
              .not_valid_before(now - dt.timedelta(minutes=5))
              .not_valid_after(now + dt.timedelta(days=2))
              .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]),
                             critical=False)
              .sign(ca_key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(ca=directory / "ca.pem", cert=directory / "broker.pem",
                     key=directory / "broker.key", client_cert=directory / "client.pem",
                     client_key=directory / "client.key")
    files.client_cert.write_bytes(client.public_bytes(serialization.Encoding.PEM))
    write_private(files.client_key, client_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    write_private(files.key, key.private_bytes(serialization.Encoding.PEM,
                                                serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
    return files


def secured_appliance_config(path: Path, bootstrap: str, kafka: dict[str, str],
                             checkpoint: str = "checkpoint") -> Path:
    """An ``appliance.toml`` (0600) on a secured broker: ``kafka`` holds the [kafka] client
    settings (never the password: the appliance reads it from
    ``APPLIANCE_KAFKA_SASL_PASSWORD``); micro-batches every 500 ms, ``rules.yml`` beside
    the config, ``local[2]``, metrics on a port the system picks."""
    settings = "".join(f'"{key}" = "{value}"\n' for key, value in kafka.items())
    return write_private(path, f"""[kafka]
bootstrap_servers = "{bootstrap}"
{settings}[query]
trigger = "microbatch"
interval = "500 milliseconds"
checkpoint_dir = "{checkpoint}"
[rules]
path = "rules.yml"
[spark]
master = "local[2]"
[metrics]
port = 0
""")


def new_password() -> str:
    return "pw-" + secrets.token_hex(12)


def make_users(path: Path, password: str, user: str = USER) -> Path:
    add_user(path, user, password)
    return path


def broker_args(protocol: str, tls: TlsFiles | None = None, users: Path | None = None,
                mechanisms: str | None = None) -> list[str]:
    """``appliance broker`` flags for a secured listener (paths only, no secrets)."""
    args = ["--security-protocol", protocol]
    if tls is not None:
        args += ["--ssl-certfile", str(tls.cert), "--ssl-keyfile", str(tls.key)]
    if users is not None:
        args += ["--sasl-users", str(users)]
    if mechanisms:
        args += ["--sasl-mechanisms", mechanisms]
    return args


# -- audits ---------------------------------------------------------------------------------

def process_tree(root_pid: int) -> set[int]:
    """``root_pid`` and all its descendants (from /proc/*/stat)."""
    return set(tree(root_pid))


def _listen_inodes() -> dict[int, str]:
    """Socket inode -> "address:port" of every listening TCP socket on this host."""
    out = {}
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A":  # TCP_LISTEN
                continue
            hex_addr, hex_port = fields[1].split(":")
            raw = bytes.fromhex(hex_addr)
            if v6:  # four little-endian 32-bit words
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                addr = ipaddress.IPv6Address(raw)
                addr = addr.ipv4_mapped or addr
            else:
                addr = ipaddress.IPv4Address(raw[::-1])
            out[int(fields[9])] = f"{addr}:{int(hex_port, 16)}"
    return out


def listening_addresses(pids: set[int]) -> dict[int, list[str]]:
    """pid -> the addresses its listening TCP sockets are bound to."""
    inodes = _listen_inodes()
    out: dict[int, list[str]] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inode = int(target[8:-1])
                if inode in inodes:
                    out.setdefault(pid, []).append(inodes[inode])
    return out


def is_loopback(address: str) -> bool:
    return ipaddress.ip_address(address.rpartition(":")[0]).is_loopback


def cmdlines_containing(secret: str) -> list[str]:
    """Command lines of any process on this host that contain ``secret``."""
    hits = []
    needle = secret.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in raw:
            shown = raw.replace(b"\0", b" ")[:200]
            hits.append(f"{entry}: {shown!r}")
    return hits


def files_containing(secret: str, *roots: Path) -> list[str]:
    """Files under ``roots`` (recursively) whose bytes contain ``secret``."""
    needle = secret.encode()
    hits = []
    for root in roots:
        paths = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for path in paths:
            try:
                if needle in path.read_bytes():
                    hits.append(str(path))
            except OSError:
                continue
    return hits
