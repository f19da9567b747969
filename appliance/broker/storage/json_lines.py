"""A small append-only file of JSON lines: the change log of a piece of broker state.

Appending a line costs a ``write()`` (and an fsync when asked), where rewriting a file
through a rename costs a journal commit on ext4 (about 1.5 ms even without fsync): the
transaction state changes several times per transaction, so it is logged, and rewritten
whole (``rewrite``, atomically) only when the log has grown well past what it holds.

A last line torn by a crash (the process died mid-write: that change was never
acknowledged) is cut off when the file is read; any other line that is not JSON is an
error the owner reports (ValueError).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from appliance.broker.storage.durable_io import StorageError, replace_file


class JsonLines:
    def __init__(self, path: Path, sync: bool) -> None:
        self.path = path
        self.sync = sync
        self.lines = 0  # lines in the file

    def read(self) -> list[dict]:
        """Every whole line, in order ([] if there is no file); a torn last line is cut."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        out = []
        lines = data.split(b"\n")
        whole = len(data) if data.endswith(b"\n") or not data else data.rfind(b"\n") + 1
        for i, line in enumerate(lines):
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except ValueError:
                if i == len(lines) - 1 and not data.endswith(b"\n"):
                    break  # torn by a crash: cut below
                raise ValueError(f"{self.path}: line {i + 1} is not JSON") from None
        if whole < len(data):
            os.truncate(self.path, whole)
        self.lines = len(out)
        return out

    def append(self, records: list[dict]) -> None:
        """One ``write()`` of the records' lines; StorageError if it failed (the file is
        cut back to where it was)."""
        data = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n"
                        for r in records)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise StorageError("open", self.path, exc) from exc
        try:
            size = os.fstat(fd).st_size
            try:
                written = os.write(fd, data)
                if written != len(data):
                    raise StorageError("write", self.path, detail="short write")
                if self.sync:
                    os.fsync(fd)
            except OSError as exc:
                os.ftruncate(fd, size)
                raise StorageError("write", self.path, exc) from exc
            except StorageError:
                os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)
        self.lines += len(records)

    def rewrite(self, records: list[dict]) -> None:
        """Replace the file with just these lines, atomically (StorageError on failure:
        the old file stays, still right)."""
        data = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n"
                        for r in records)
        try:
            replace_file(self.path, data, self.sync)
        except OSError as exc:
            raise StorageError("rewrite", self.path, exc) from exc
        self.lines = len(records)
