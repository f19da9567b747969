"""The broker's users file: who may connect, as salted SCRAM credentials (TOML).

```toml
[users.appliance.SCRAM-SHA-256]      # written by `appliance broker-user add`
salt = "base64"
iterations = 8192
stored_key = "base64"
server_key = "base64"

[users.appliance.SCRAM-SHA-512]
...

[users.tester]                       # allowed, for tests: SCRAM credentials are derived
password = "..."                     # at load time; prefer the salted form
```

Why this shape: the broker never needs a password to check one (SCRAM's StoredKey proves
it, and SASL/PLAIN is checked by deriving the same key), so the file that must stay on the
broker's disk holds nothing that logs a client in elsewhere. Like ssh keys, the file must
not be readable by group or others: a readable file is refused, not silently used.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from appliance.broker.security.scram import (
    DEFAULT_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
)
from appliance.broker.toml_file import read_toml

_CREDENTIAL_KEYS = ("salt", "iterations", "stored_key", "server_key")


class CredentialsError(Exception):
    """The users file cannot be used; the message names the file and the entry."""


@dataclass
class Users:
    """User name -> mechanism name -> credential, as loaded from the file."""

    scram: dict[str, dict[str, ScramCredential]] = field(default_factory=dict)

    def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.scram.get(user, {}).get(mechanism)

    def names(self) -> list[str]:
        return sorted(self.scram)


def check_mode(path: Path) -> None:
    """Refuse a secret file that group or others may read or write."""
    try:
        st = path.stat()
    except OSError as exc:
        raise CredentialsError(f"{path}: cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise CredentialsError(f"{path}: not a regular file")
    if st.st_mode & 0o077:
        raise CredentialsError(
            f"{path}: mode {stat.S_IMODE(st.st_mode):04o} lets group or others access it; "
            f"run: chmod 600 {path}")


def _b64(path: Path, where: str, key: str, value) -> bytes:
    if not isinstance(value, str):
        raise CredentialsError(f"{path}: {where}.{key}: must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise CredentialsError(f"{path}: {where}.{key}: not valid base64") from None


def _credential(path: Path, where: str, entry) -> ScramCredential:
    if not isinstance(entry, dict):
        raise CredentialsError(f"{path}: {where}: must be a table")
    unknown = sorted(set(entry) - set(_CREDENTIAL_KEYS))
    missing = [k for k in _CREDENTIAL_KEYS if k not in entry]
    if unknown or missing:
        what = f"unknown key {unknown[0]!r}" if unknown else f"missing key {missing[0]!r}"
        raise CredentialsError(f"{path}: {where}: {what}")
    iterations = entry["iterations"]
    if not isinstance(iterations, int) or iterations < MIN_ITERATIONS:
        raise CredentialsError(f"{path}: {where}.iterations: must be an integer >= "
                               f"{MIN_ITERATIONS}")
    return ScramCredential(salt=_b64(path, where, "salt", entry["salt"]),
                           iterations=iterations,
                           stored_key=_b64(path, where, "stored_key", entry["stored_key"]),
                           server_key=_b64(path, where, "server_key", entry["server_key"]))


def load_users(path: str | os.PathLike, allow_empty: bool = False) -> Users:
    """Read and check the users file; raises CredentialsError with one operator line.
    ``allow_empty``: a file without users is fine (the data directory's, whose users the
    admin API adds and deletes)."""
    path = Path(path)
    check_mode(path)
    data = read_toml(path, CredentialsError)
    unknown = sorted(set(data) - {"users"})
    if unknown:
        raise CredentialsError(f"{path}: {unknown[0]}: unknown key (only [users.NAME])")
    table = data.get("users", {})
    if not isinstance(table, dict) or (not table and not allow_empty):
        raise CredentialsError(f"{path}: users: no users defined")
    users = Users()
    for name, entry in table.items():
        where = f"users.{name}"
        if not isinstance(entry, dict) or not entry:
            raise CredentialsError(f"{path}: {where}: must be a table of credentials")
        creds: dict[str, ScramCredential] = {}
        for key, value in entry.items():
            if key == "password":
                if not isinstance(value, str) or not value:
                    raise CredentialsError(f"{path}: {where}.password: must be a non-empty "
                                           f"string")
                for mech in MECHANISMS.values():
                    creds.setdefault(mech.name, ScramCredential.derive(mech, value))
            elif key in MECHANISMS:
                creds[key] = _credential(path, f"{where}.{key}", value)
            else:
                raise CredentialsError(
                    f"{path}: {where}.{key}: unknown key (want password or one of "
                    f"{', '.join(MECHANISMS)})")
        users.scram[name] = creds
    return users


def load_if_present(path: str | os.PathLike) -> Users:
    """The data directory's users file: its users, or none before the first is added."""
    return load_users(path, allow_empty=True) if Path(path).exists() else Users()


# -- writing ------------------------------------------------------------------------------

def _toml_key(name: str) -> str:
    if name and all(c.isalnum() or c in "-_" for c in name):
        return name
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_users(users: Users) -> str:
    lines = ["# Broker users (SCRAM salted credentials; no passwords). Keep mode 0600.", ""]
    for name in users.names():
        for mech, cred in sorted(users.scram[name].items()):
            lines.append(f"[users.{_toml_key(name)}.{mech}]")
            for key, value in cred.to_dict().items():
                lines.append(f"{key} = {value}" if isinstance(value, int)
                             else f'{key} = "{value}"')
            lines.append("")
    return "\n".join(lines)


def holds(users: Users, name: str, password: str, mechanisms: tuple[str, ...],
          iterations: int) -> bool:
    """Does ``users`` already give ``name`` exactly these mechanisms, each derived from
    ``password`` with ``iterations``? (A salt is random, so comparing files cannot tell.)"""
    creds = users.scram.get(name)
    if creds is None or set(creds) != set(mechanisms):
        return False
    return all(cred.iterations == iterations
               and cred.verify_password(MECHANISMS[mech], password)
               for mech, cred in creds.items())


def add_user(path: str | os.PathLike, name: str, password: str,
             mechanisms: tuple[str, ...] = tuple(MECHANISMS),
             iterations: int = DEFAULT_ITERATIONS, only_if_changed: bool = False) -> bool:
    """Add or replace ``name`` in the users file (created mode 0600), storing only SCRAM
    credentials derived from ``password`` with a fresh random salt per mechanism; whether
    the file was written.

    ``only_if_changed`` leaves the file alone when it already holds these credentials
    (``holds``): configuration management can then run the command on every pass and
    restart the broker only when a user or password really changed.
    Entries given as ``password`` in an existing file are rewritten in salted form.
    """
    if not name:
        raise CredentialsError("user name must not be empty")
    if not password:
        raise CredentialsError("password must not be empty")
    for mech in mechanisms:
        if mech not in MECHANISMS:
            raise CredentialsError(f"unknown mechanism {mech!r} (want one of "
                                   f"{', '.join(MECHANISMS)})")
    path = Path(path)
    users = load_users(path, allow_empty=True) if path.exists() else Users()
    if only_if_changed and holds(users, name, password, mechanisms, iterations):
        return False
    users.scram[name] = {m: ScramCredential.derive(MECHANISMS[m], password,
                                                   iterations=iterations)
                         for m in mechanisms}
    save_users(path, users)
    return True


def save_users(path: str | os.PathLike, users: Users) -> None:
    """Write the users file atomically (mode 0600): a temporary file, fsynced, renamed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".users-", dir=path.parent)  # mkstemp: mode 0600
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(render_users(users))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
