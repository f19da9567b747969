"""Simulated power cuts for the broker: build the ``power_cut_shim.c`` LD_PRELOAD library,
and rebuild a data directory as a power cut would leave it.

A cut is: run the broker with the library preloaded (it records what each fsync made
durable), kill -9 it, and ``rebuild`` a fresh directory from the records alone; every
write that was not fsynced, and every new name whose directory was not fsynced, is gone.
Before each run ``mark_durable`` fsyncs the whole starting tree under the library, so the
records start from "everything here is on disk".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.faults.preload import build_library

SOURCE = Path(__file__).resolve().parent / "power_cut_shim.c"
STORE_ENV = "POWER_CUT_STORE"

# Run under the library: fsync every directory and file below argv[1].
_FSYNC_TREE = """
import os, sys
for top, dirs, files in os.walk(sys.argv[1]):
    for name in files:
        fd = os.open(os.path.join(top, name), os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)
"""


def build(out_dir: Path) -> Path:
    """Compile the library; returns the .so path."""
    return build_library(SOURCE, out_dir)


def env(lib: Path, store: Path) -> dict[str, str]:
    return {"LD_PRELOAD": str(lib), STORE_ENV: str(store)}


def mark_durable(lib: Path, store: Path, root: Path) -> None:
    """Record every directory and file below ``root`` as durable (as after a full sync)."""
    store.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", _FSYNC_TREE, str(root)], check=True, timeout=120,
                   env={"PATH": "/usr/bin:/bin", **env(lib, store)})


class SyncRecord:
    """One line of the library's journal."""

    def __init__(self, line: str) -> None:
        kind, self.key, size, self.path = line.rstrip("\n").split(" ", 3)
        self.is_dir = kind == "d"
        self.size = int(size)


def journal(store: Path) -> list[SyncRecord]:
    path = store / "journal"
    if not path.exists():
        return []
    return [SyncRecord(line) for line in path.read_text().splitlines()]


def listed_names(store: Path, dir_key: str) -> set[str]:
    """The names a directory's last recorded sync made durable."""
    listing = store / f"d-{dir_key}"
    if not listing.exists():
        return set()
    return {line.split(" ", 2)[2] for line in listing.read_text().splitlines()}


def rebuild(store: Path, root: Path, target: Path) -> None:
    """Create ``target`` as ``root`` would be after a power cut now."""
    keys = [r.key for r in journal(store) if r.is_dir and r.path == str(root.resolve())]
    assert keys, f"{root} was never recorded as durable (mark_durable first)"
    target.mkdir()
    _rebuild_dir(store, keys[-1], target)


def _rebuild_dir(store: Path, key: str, target: Path) -> None:
    listing = store / f"d-{key}"
    if not listing.exists():
        return  # never fsynced since it was made: its entries are all lost
    for line in listing.read_text().splitlines():
        kind, entry_key, name = line.split(" ", 2)
        if kind == "d":
            (target / name).mkdir()
            _rebuild_dir(store, entry_key, target / name)
        else:
            content = store / f"i-{entry_key}"
            (target / name).write_bytes(content.read_bytes() if content.exists() else b"")
