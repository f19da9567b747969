"""The few file-system operations durable state needs, each with its fsync where POSIX
requires one.

A file's data reaching the disk (fsync/fdatasync) does not make the file findable after a
power cut: its name is an entry in the parent directory, which is only durable once the
directory itself is fsynced; the same holds for a rename and for a new directory. Every
helper here that creates or renames a name says which directory it synced, so the
callers' ordering (data first, then the name that makes it visible) is explicit.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


class StorageError(Exception):
    """A write to the data directory failed (disk full, I/O error) and was undone: nothing
    of it is kept or served. The message names the file and the OS error."""

    def __init__(self, operation: str, path: Path, exc: OSError | None = None,
                 detail: str = "") -> None:
        self.operation = operation
        self.path = path
        self.errno_name = errno.errorcode.get(exc.errno, str(exc.errno)) \
            if exc is not None and exc.errno is not None else "short_write"
        why = exc.strerror if exc is not None and exc.strerror else detail
        super().__init__(f"{operation} {path}: {why}")


def fsync_dir(path: Path) -> None:
    """Make the entries of directory ``path`` (new, renamed or removed names) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dir(path: Path) -> bool:
    """Create ``path`` (its parent must exist) and make its name durable; False if it
    already existed (then nothing is synced: whoever created it did)."""
    try:
        path.mkdir()
    except FileExistsError:
        return False
    fsync_dir(path.parent)
    return True


def make_dirs(path: Path) -> None:
    """``make_dir`` for ``path`` and every missing parent, outermost first."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        make_dir(d)


TMP_SUFFIX = ".tmp"  # replace_file's temporary: a leftover one is a crash's, safe to remove


def replace_file(path: Path, data: bytes, sync: bool = True) -> None:
    """Atomically give ``path`` the content ``data``, durably: a temporary file is written
    and fsynced, renamed over ``path``, and the directory fsynced. After a crash at any
    point ``path`` holds the old content or the new, never a mix or nothing.

    ``sync=False`` (``--flush write``: what the kernel holds survives a kill -9, not a
    power cut) skips both fsyncs; the rename keeps the file whole either way."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    if sync:
        fsync_dir(path.parent)
