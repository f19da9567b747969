"""The ACL bindings on disk: ``DATA_DIR/acls.json``, the one place they live.

Two writers share the file: the running broker (CreateAcls, DeleteAcls) and ``appliance
broker-user acl add|remove`` (offline, like the users file). Each change is a
read-modify-write of the file under an exclusive ``flock`` on ``acls.lock`` beside it, so
neither overwrites the other's change; the broker reads what the CLI wrote on SIGHUP or
at its next start, and its own changes start from the file, never from an older copy.
Writes are atomic and durable (``storage.durable_io.replace_file``: temporary file, fsync,
rename, directory fsync), as the broker's other metadata: an acknowledged CreateAcls
survives a power cut, and a crash never leaves half a file.

Without a data directory the bindings live in memory only and die with the broker.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from appliance.broker.acl.model import AclBinding, AclError, make_binding
from appliance.broker.storage.durable_io import replace_file

FILE_NAME = "acls.json"
LOCK_NAME = "acls.lock"
FORMAT_VERSION = 1
_FIELDS = AclBinding._fields


class AclStoreError(Exception):
    """The ACL file cannot be read or written; the message names the file and field."""


def to_json(b: AclBinding) -> dict:
    return {"resource_type": b.resource_type.name, "resource_name": b.resource_name,
            "pattern_type": b.pattern_type.name, "principal": b.principal, "host": b.host,
            "operation": b.operation.name, "permission": b.permission.name}


def parse(path: Path, text: str) -> list[AclBinding]:
    """The bindings in ``text`` (the content of ``path``); AclStoreError names the field."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise AclStoreError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("acls"), list):
        raise AclStoreError(f"{path}: acls: missing, or not a list of bindings")
    if doc.get("version", FORMAT_VERSION) != FORMAT_VERSION:
        raise AclStoreError(f"{path}: version: {doc.get('version')!r} is not "
                            f"{FORMAT_VERSION} (written by a newer broker?)")
    out: list[AclBinding] = []
    seen: set[AclBinding] = set()
    for i, entry in enumerate(doc["acls"]):
        where = f"acls[{i}]"
        if not isinstance(entry, dict):
            raise AclStoreError(f"{path}: {where}: not an object")
        missing = [f for f in _FIELDS if f not in entry]
        if missing:
            raise AclStoreError(f"{path}: {where}.{missing[0]}: missing")
        unknown = sorted(set(entry) - set(_FIELDS))
        if unknown:
            raise AclStoreError(f"{path}: {where}.{unknown[0]}: unknown field")
        try:
            binding = make_binding(*(entry[f] for f in _FIELDS))
        except AclError as exc:
            raise AclStoreError(f"{path}: {where}.{exc}") from None
        if binding not in seen:
            seen.add(binding)
            out.append(binding)
    return out


def render(bindings: list[AclBinding]) -> bytes:
    doc = {"version": FORMAT_VERSION, "acls": [to_json(b) for b in bindings]}
    return (json.dumps(doc, indent=1) + "\n").encode()


class AclStore:
    """``acls.json`` in ``data_dir``, or memory when there is none."""

    def __init__(self, data_dir: str | os.PathLike | None) -> None:
        self.path = Path(data_dir) / FILE_NAME if data_dir is not None else None
        self._memory: list[AclBinding] = []

    def load(self) -> list[AclBinding]:
        """The stored bindings; none when the file does not exist yet."""
        if self.path is None:
            return list(self._memory)
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise AclStoreError(f"{self.path}: cannot read: {exc.strerror}") from None
        return parse(self.path, text)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        assert self.path is not None
        try:
            fd = os.open(self.path.with_name(LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise AclStoreError(f"{self.path.with_name(LOCK_NAME)}: cannot open: "
                                f"{exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def update(self, change: Callable[[list[AclBinding]], list[AclBinding]]
               ) -> list[AclBinding]:
        """Apply ``change`` to the stored bindings, durably; returns the new list."""
        if self.path is None:
            self._memory = change(list(self._memory))
            return list(self._memory)
        with self._locked():
            current = self.load()
            new = change(list(current))
            if new != current:
                try:
                    replace_file(self.path, render(new))
                except OSError as exc:
                    raise AclStoreError(f"{self.path}: cannot write: {exc.strerror}") from None
            return new
