"""Putting a compaction pass's files in place of the segments they clean, crash-safely
(on the event loop; the pass wrote them on a worker thread: ``cleaner``).

1. every ``<base>.cleaned`` is renamed ``<base>.swap``, then the directory is fsynced: from
   here the pass is decided;
2. each old segment is deleted (its readers keep their open file) and its ``.swap``
   renamed to ``<base>.log``, then reopened with a fresh index; an empty ``.swap`` (the
   pass left nothing of that segment) is deleted with it;
3. the clean point (``cleaner-offset-checkpoint``) moves to the pass's end.

A crash before 1 leaves ``.cleaned`` files: recovery deletes them (the old segments are
whole). A crash after 1 leaves ``.swap`` files: recovery finishes step 2 for each. Either
way every segment is the old one or the cleaned one, and both hold each key's newest
record: compaction only ever removes records a newer one of the same key supersedes.
"""

from __future__ import annotations

import os
from pathlib import Path

from appliance.broker.storage.cleaner import CLEANED_SUFFIX, CleanResult
from appliance.broker.storage.durable_io import fsync_dir, replace_file
from appliance.broker.storage.offset_index import SUFFIX as INDEX_SUFFIX
from appliance.broker.storage.segment_file import SUFFIX, Segment, segment_name
from appliance.logs import get_logger

log = get_logger("appliance.broker")
SWAP_SUFFIX = ".swap"
CLEAN_POINT = "cleaner-offset-checkpoint"


def read_clean_point(directory: Path) -> int:
    try:
        return int((directory / CLEAN_POINT).read_text())
    except (FileNotFoundError, ValueError):
        return 0


def discard(result: CleanResult) -> None:
    for cleaned in result.cleaned.values():
        cleaned.path.unlink(missing_ok=True)


def recover_swaps(directory: Path) -> int:
    """Before a partition's segments are opened: drop unfinished passes' ``.cleaned``
    files, finish decided ones' ``.swap`` files. Returns the swaps finished."""
    for leftover in directory.glob("*" + CLEANED_SUFFIX):
        leftover.unlink(missing_ok=True)
    done = 0
    for swap in sorted(directory.glob("*" + SWAP_SUFFIX)):
        base = int(swap.name[:-len(SWAP_SUFFIX)])
        (directory / segment_name(base, INDEX_SUFFIX)).unlink(missing_ok=True)
        if swap.stat().st_size:
            os.replace(swap, directory / segment_name(base, SUFFIX))
        else:  # nothing of that segment was left
            (directory / segment_name(base, SUFFIX)).unlink(missing_ok=True)
            swap.unlink()
        done += 1
    if done:
        fsync_dir(directory)
        log.warning("broker.compaction_swap_finished", directory=str(directory), segments=done)
    return done


def swap_in(segs, result: CleanResult) -> int | None:
    """Replace ``segs``' (a ``PartitionSegments``) cleaned segments; returns the bytes
    freed, or None if the segments changed under the pass (retention, a deleted topic):
    its files are then discarded."""
    by_base = {s.base: s for s in segs.segments[:-1]}  # never the active one
    if any(base not in by_base for base in result.cleaned) or not segs.dir.exists():
        discard(result)
        return None
    directory: Path = segs.dir
    swaps = {}
    for base, cleaned in result.cleaned.items():
        swap = directory / (segment_name(base, "") + SWAP_SUFFIX)
        os.replace(cleaned.path, swap)
        swaps[base] = swap
    fsync_dir(directory)  # decided: recovery finishes the swap from here
    freed = 0
    for base in sorted(result.cleaned):
        old = by_base[base]
        cleaned = result.cleaned[base]
        i = segs.segments.index(old)
        old.delete()
        freed += old.size
        swap = swaps[base]
        if not cleaned.size:  # nothing of it was left
            swap.unlink()
            del segs.segments[i]
            del segs.bases[i]
            continue
        os.replace(swap, old.path)
        new = Segment(directory, base)
        new.open_for_append()
        new.set_recovered(cleaned.size, cleaned.next_offset, cleaned.max_ts,
                          cleaned.since_index, old.last_append_ms)
        new.created_ms = old.created_ms
        new.index.rewrite(list(cleaned.entries))
        new.close_index()
        segs.segments[i] = new
        freed -= new.size
    fsync_dir(directory)
    replace_file(directory / CLEAN_POINT, str(result.end_offset).encode())
    segs.size -= freed
    return freed
