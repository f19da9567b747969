"""``appliance.query.checkpoint.repair`` on hand-made checkpoint directories (no Spark): what it
moves aside, what it must never touch, and that nothing is deleted."""

from __future__ import annotations

from pathlib import Path

from appliance.query.checkpoint import INITIAL_OFFSETS, entry_problem, repair

OFFSETS = 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n{"events":{"0":5}}'
COMMIT = 'v1\n{"nextBatchWatermarkMs":0}'


def checkpoint(root: Path, offsets: dict[int, str], commits: dict[int, str]) -> Path:
    for log, entries in (("offsets", offsets), ("commits", commits)):
        (root / log).mkdir(parents=True, exist_ok=True)
        for batch, text in entries.items():
            (root / log / str(batch)).write_text(text)
            (root / log / f".{batch}.crc").write_bytes(b"crc")
    (root / "metadata").write_text('{"id":"x"}')
    source = root / "sources" / "0"
    source.mkdir(parents=True)
    (source / INITIAL_OFFSETS).write_text('{"events":{"0":0}}')
    return root


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_a_healthy_checkpoint_is_left_alone(tmp_path):
    root = checkpoint(tmp_path / "cp", {0: OFFSETS, 1: OFFSETS}, {0: COMMIT})
    before = files(root)
    assert repair(root) == []
    assert files(root) == before and not (root / "quarantine").exists()


def test_missing_checkpoint_is_fine(tmp_path):
    assert repair(tmp_path / "nothing-yet") == []


def test_orphaned_temp_files_are_moved_out_of_every_log(tmp_path):
    root = checkpoint(tmp_path / "cp", {0: OFFSETS}, {})
    orphans = ["commits/.0.3f1c.tmp", "commits/..0.3f1c.tmp.crc", "offsets/.1.77aa.tmp",
               ".metadata.9b.tmp", f"sources/0/.{INITIAL_OFFSETS}.tmp"]
    for name in orphans:
        (root / name).write_bytes(b"")
    fixes = repair(root)
    assert sorted(f.path for f in fixes) == sorted(orphans)
    assert all("temp file" in f.reason for f in fixes)
    for fix in fixes:  # moved, not deleted
        assert not (root / fix.path).exists() and (root / fix.moved_to).is_file()
        assert fix.moved_to.startswith("quarantine/") and fix.moved_to.endswith(fix.path)
    assert "offsets/0" in files(root) and "metadata" in files(root)


def test_a_torn_last_commit_goes_and_the_batch_is_replayed(tmp_path):
    root = checkpoint(tmp_path / "cp", {0: OFFSETS, 1: OFFSETS}, {0: COMMIT, 1: ""})
    fixes = repair(root)
    assert [f.path for f in fixes] == ["commits/1", "commits/.1.crc"]
    assert "empty entry" in fixes[0].reason
    assert {"offsets/1", "commits/0"} <= files(root)


def test_a_torn_last_offset_entry_takes_its_commit_claims_with_it(tmp_path):
    cut = OFFSETS[: len(OFFSETS) - 7]
    root = checkpoint(tmp_path / "cp", {0: OFFSETS, 1: cut}, {0: COMMIT, 1: COMMIT})
    fixes = repair(root)
    assert [f.path for f in fixes] == ["offsets/1", "offsets/.1.crc", "commits/1",
                                       "commits/.1.crc"]
    assert "cut short" in fixes[0].reason and "offsets entry is gone" in fixes[2].reason


def test_only_the_newest_entries_are_judged(tmp_path):
    """A crash tears the entry being written, never an older one: those are Spark's to judge."""
    root = checkpoint(tmp_path / "cp", {0: "garbage", 1: OFFSETS}, {0: COMMIT})
    assert repair(root) == []


def test_a_torn_initial_offsets_file_goes(tmp_path):
    root = checkpoint(tmp_path / "cp", {}, {})
    (root / "sources" / "0" / INITIAL_OFFSETS).write_text('{"events":{"0"')
    fixes = repair(root)
    assert [f.path for f in fixes] == [f"sources/0/{INITIAL_OFFSETS}"]


def test_entry_problem_reads_spark_log_format(tmp_path):
    entry = tmp_path / "0"
    cases = {OFFSETS: None, COMMIT: None, "v1\n{}\n-": None, "": "empty entry",
             "v1": "version line only (cut short)", "{}": "no version line",
             'v1\n{"a":': "truncated JSON (cut short)"}
    for text, problem in cases.items():
        entry.write_text(text)
        assert entry_problem(entry) == problem, text
    entry.write_bytes(b"v1\n\xff")
    assert entry_problem(entry) == "not UTF-8"


def test_a_torn_metadata_file_goes(tmp_path):
    root = checkpoint(tmp_path / "cp", {0: OFFSETS}, {0: COMMIT})
    (root / "metadata").write_bytes(b"")
    (root / ".metadata.crc").write_bytes(b"crc")
    fixes = repair(root)
    assert [f.path for f in fixes] == ["metadata", ".metadata.crc"]
    assert {"offsets/0", "commits/0"} <= files(root)
