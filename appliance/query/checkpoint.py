"""Checkpoint hygiene: before the query starts, undo what a crash can leave behind.

Spark writes every checkpoint entry (``offsets/N``, ``commits/N``, ``metadata``) by writing
a hidden temp file (``.N.<uuid>.tmp``) and renaming it into place. A SIGKILL between the two
leaves the temp file behind. Spark never reads those files, but in real-time and
micro-batch mode a query whose offset log is empty counts as *new*, and a new query
refuses to start when its ``offsets`` or ``commits`` directory lists any file at all
(``spark.sql.streaming.verifyCheckpointDirectoryEmptyOnStart``, on by default since 4.1),
Spark's own leftover temp files included:

- real-time mode drops an uncommitted last batch on restart; if that was batch 0 and the
  kill hit its commit, ``commits/.0.<uuid>.tmp`` remains and every restart fails with
  ``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY`` (a crash loop that never ends);
- any mode built on micro-batches (real-time too) meets the same refusal when the kill hit
  the very first ``offsets/0`` write (``offsets/.0.<uuid>.tmp`` and no ``offsets/0``).

So every orphaned temp file (and its ``.crc`` sibling) is moved out of the log directories.
A torn last entry (empty or cut short: a power loss, or a disk that filled under a
write that skipped the temp-and-rename path) is moved aside too, with every commit that
claims a batch the offset log no longer has: Spark then replays that batch from the last
intact entry, which at-least-once delivery allows (duplicates, never loss).

Nothing is deleted: files are moved under ``<checkpoint>/quarantine/<UTC time>/`` with
their relative paths, and each move is returned (and logged by the caller). This runs
only while no query uses the checkpoint: the appliance is its only writer.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

#: The checkpoint's write-ahead logs whose entries are numbered batches/epochs.
LOG_DIRS = ("offsets", "commits")
QUARANTINE = "quarantine"
#: Spark's rename-based writes (``.0.<uuid>.tmp``) and the connector's initial-offsets write
#: (``.appliance-kafka-initial-offsets.json.tmp``), plus Hadoop's checksum of either.
_TEMP = re.compile(r"^\.{1,2}.+\.tmp(\.crc)?$")
_VERSION_LINE = re.compile(r"^v[1-9][0-9]*$")
INITIAL_OFFSETS = "appliance-kafka-initial-offsets.json"


@dataclass(frozen=True)
class Repair:
    """One file moved out of the way: where it was, where it went, and why."""

    path: str  # relative to the checkpoint root
    moved_to: str
    reason: str


def entry_problem(path: Path) -> str | None:
    """Why a log entry cannot be read back (None if it can): ``v<N>`` then JSON lines."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    if not data.strip():
        return "empty entry"
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return "not UTF-8"
    if not _VERSION_LINE.match(lines[0].strip()):
        return "no version line"
    body = [line for line in lines[1:] if line.strip()]
    if not body:
        return "version line only (cut short)"
    for line in body:
        if line.strip() == "-":  # an offset log's "no offset for this source"
            continue
        try:
            json.loads(line)
        except ValueError:
            return "truncated JSON (cut short)"
    return None


def batch_ids(directory: Path) -> list[int]:
    """The numbered entries of an ``offsets`` or ``commits`` log, ascending (temp and
    ``.crc`` files are not entries); [] when the directory does not exist."""
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def is_fresh(checkpoint_dir: str | Path) -> bool:
    """No batch or epoch planned yet: a query started here numbers its generations from 0
    (``offsets`` is written before each one runs)."""
    return not batch_ids(Path(checkpoint_dir) / "offsets")


class _Mover:
    def __init__(self, root: Path):
        self.root = root
        self.stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        self.repairs: list[Repair] = []

    def move(self, path: Path, reason: str) -> None:
        rel = path.relative_to(self.root)
        target = self.root / QUARANTINE / self.stamp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(path), str(target))
        self.repairs.append(Repair(str(rel), str(target.relative_to(self.root)), reason))

    def move_entry(self, directory: Path, batch: int, reason: str) -> None:
        """A numbered entry and its Hadoop checksum file ``.N.crc``."""
        self.move(directory / str(batch), reason)
        crc = directory / f".{batch}.crc"
        if crc.exists():
            self.move(crc, f"checksum of {reason}")


def _temp_dirs(root: Path) -> list[Path]:
    """Directories Spark or the connector write with temp-and-rename."""
    dirs = [root] + [root / name for name in LOG_DIRS]
    sources = root / "sources"
    if sources.is_dir():
        dirs += [p for p in sources.iterdir() if p.is_dir()]
    return [d for d in dirs if d.is_dir()]


def repair(checkpoint_dir: str | Path) -> list[Repair]:
    """Make a crashed checkpoint startable again; returns what was moved (often nothing)."""
    root = Path(checkpoint_dir)
    if not root.is_dir():
        return []
    mover = _Mover(root)
    for directory in _temp_dirs(root):
        for path in sorted(directory.iterdir()):
            if path.is_file() and _TEMP.match(path.name):
                mover.move(path, "orphaned temp file of an interrupted write")
    offsets, commits = root / "offsets", root / "commits"
    # Only the newest entry of a log can be torn by a crash; older ones were complete
    # before the next batch began. A torn one goes; then look at the new newest.
    for directory in (offsets, commits):
        for batch in reversed(batch_ids(directory)):
            problem = entry_problem(directory / str(batch))
            if problem is None:
                break
            mover.move_entry(directory, batch, f"torn last entry ({problem})")
    kept = batch_ids(offsets)
    newest_offsets = kept[-1] if kept else -1
    for batch in batch_ids(commits):
        if batch > newest_offsets:
            mover.move_entry(commits, batch,
                             f"commit of batch {batch}, whose offsets entry is gone")
    metadata = root / "metadata"
    if metadata.is_file():
        try:
            json.loads(metadata.read_bytes().decode("utf-8"))["id"]
        except (ValueError, UnicodeDecodeError, KeyError, TypeError):
            mover.move(metadata, "torn query metadata (Spark writes a new query id)")
            if (root / ".metadata.crc").exists():
                mover.move(root / ".metadata.crc", "checksum of torn query metadata")
    sources = root / "sources"
    if sources.is_dir():
        for source in sorted(p for p in sources.iterdir() if p.is_dir()):
            initial = source / INITIAL_OFFSETS
            if initial.is_file():
                try:
                    json.loads(initial.read_bytes().decode("utf-8"))
                except (ValueError, UnicodeDecodeError):
                    mover.move(initial, "torn initial offsets of the source")
                    crc = source / f".{INITIAL_OFFSETS}.crc"
                    if crc.exists():
                        mover.move(crc, "checksum of torn initial offsets")
    return mover.repairs


def committed_offsets(checkpoint_dir: str | Path) -> dict[str, dict[int, int]]:
    """Offsets (next to read) per topic/partition of the newest COMMITTED batch or epoch.

    Spark writes ``offsets/<id>`` (``v1``, metadata JSON, then one JSON line per source:
    ``{"topic": {"0": 42}}``) before running batch ``<id>`` and ``commits/<id>`` after it
    finished; only a committed id is safe to call processed.
    """
    root = Path(checkpoint_dir)
    for batch in reversed(batch_ids(root / "commits")):
        offsets_file = root / "offsets" / str(batch)
        try:
            lines = offsets_file.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        out: dict[str, dict[int, int]] = {}
        for line in lines[2:]:
            try:
                source = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(source, dict):
                for topic, parts in source.items():
                    if isinstance(parts, dict):
                        out.setdefault(topic, {}).update(
                            {int(p): int(o) for p, o in parts.items()})
        return out
    return {}


def seed_starting_offsets(checkpoint_dir: str | Path, offsets_json: str) -> Path | None:
    """Where a new query starts, said through its checkpoint instead of its
    ``startingOffsets`` option: the connector resolves a fresh query's start once and
    keeps it in ``sources/0/`` (``INITIAL_OFFSETS``, read before the option on every
    start), so a query planned before its start was known (a pair's standby) starts at
    ``offsets_json`` (``{"topic": {"0": 42}}``, exact offsets only). Only for a
    checkpoint with no batch or epoch yet; written to a temp file and renamed, as the
    connector writes it. None, and nothing written, when the checkpoint has a batch or
    epoch already: Spark resumes from that, whatever the start said."""
    if batch_ids(Path(checkpoint_dir) / "offsets"):
        return None
    source = Path(checkpoint_dir) / "sources" / "0"
    source.mkdir(parents=True, exist_ok=True)
    path = source / INITIAL_OFFSETS
    tmp = source / f".{INITIAL_OFFSETS}.tmp"
    tmp.write_text(offsets_json, encoding="utf-8")
    tmp.rename(path)
    return path


def processed_past(committed: dict[int, int], target: dict[int, int]) -> bool:
    """Whether ``committed`` (next to read, per partition, as ``committed_offsets`` gives
    them) reaches ``target`` in every partition ``target`` names."""
    return all(committed.get(p, -1) >= o for p, o in target.items())
