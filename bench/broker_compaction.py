"""Benchmark: log compaction of a large topic with few live keys (issue 53, item 2).

A durable broker takes ``--total-mb`` of records (``--record-bytes`` each, random values)
into a compacted topic of one partition whose keys are ``--live-share`` of the records
(1 %: each key written about a hundred times), in ``--segment-mb`` segments; one last
segment of distinct keys closes the rest. The bench then waits until the cleaner has
covered everything closed, and reports what its passes logged (``broker.log_cleaned``):
bytes read and written, seconds, MB/s cleaned, the log's size before and after, and the
broker's peak resident memory (VmHWM) against the memory bound with and without the
cleaner's term. Finally every key is read back once, at its newest offset.

Writes ``reports/bench/broker_compaction.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from kafka import KafkaConsumer, TopicPartition
from kafka.record.default_records import DefaultRecordBatchBuilder

from appliance.broker import EmbeddedBroker
from appliance.broker.memory_bound import Load, bound
from appliance.broker.settings import BrokerConfig
from appliance.broker.wire.client import WireClient
from bench._broker_load import process_memory, produce
from bench._machine import write_result

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "bench" / "broker_compaction.json"
MIB = 1 << 20
PER_BATCH = 100


def _batch(first: int, count: int, keys: int, record_bytes: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i in range(count):
        n = first + i
        b.append(i, timestamp=now, key=b"key-%09d" % (n % keys),
                 value=b"%012d" % n + os.urandom(record_bytes - 12), headers=[])
    return bytes(b.build())


def _passes(log_path: Path) -> list[dict]:
    out = []
    for line in log_path.read_text().splitlines():
        if line.startswith("{") and '"broker.log_cleaned"' in line:
            out.append(json.loads(line))
    return out


def _read_table(bootstrap: str, records: int, keys: int) -> dict:
    """Every record from the log start: each workload key must be there once, with its
    newest value (the largest sequence number of that key)."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest", consumer_timeout_ms=5000,
                      fetch_max_bytes=16 * MIB)
    c.assign([TopicPartition("table", 0)])
    seen: dict[bytes, list[int]] = {}
    total = 0
    for m in c:
        total += 1
        if m.key.startswith(b"key-"):
            seen.setdefault(m.key, []).append(int(m.value[:12]))
    c.close()
    newest_ok = all(len(v) == 1 and v[0] == max(range(int(k[4:]), records, keys))
                    for k, v in seen.items())
    return {"records": total, "keys_seen": len(seen), "each_key_once_newest": newest_ok}


def run(args: argparse.Namespace) -> dict:
    records = int(args.total_mb * MIB // args.record_bytes)
    keys = max(int(records * args.live_share), 1)
    segment = int(args.segment_mb * MIB)
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(
            data_dir=Path(tmp) / "data", log_path=Path(tmp) / "broker.log",
            extra_args=["--log-cleaner-dedupe-buffer-size", str(args.dedupe_mb * MIB),
                        "--retention-total-bytes", str(1 << 50)]) as broker:
        broker.create_topics({"table": 1}, {"cleanup.policy": "compact",
                                            "segment.bytes": str(segment)})
        started = time.monotonic()
        with WireClient(broker.bootstrap, timeout=60) as c:
            for first in range(0, records, PER_BATCH):
                produce(c, "table", _batch(first, min(PER_BATCH, records - first), keys,
                                           args.record_bytes))
            produced_s = time.monotonic() - started
            closer = records
            for _ in range(segment // (args.record_bytes * PER_BATCH) + 2):  # roll
                b = DefaultRecordBatchBuilder(magic=2, compression_type=0,
                                              is_transactional=False, producer_id=-1,
                                              producer_epoch=-1, base_sequence=-1,
                                              batch_size=1 << 30)
                for i in range(PER_BATCH):
                    b.append(i, timestamp=int(time.time() * 1000),
                             key=b"closer-%09d" % (closer + i),
                             value=os.urandom(args.record_bytes), headers=[])
                produce(c, "table", bytes(b.build()))
                closer += PER_BATCH
        log_dir = Path(tmp) / "data" / "topics" / "table" / "0"
        size_before = sum(p.stat().st_size for p in log_dir.glob("*.log"))
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            passes = _passes(Path(tmp) / "broker.log")
            if passes and passes[-1]["clean_point"] >= records and not passes[-1]["map_full"]:
                break
            time.sleep(1)
        passes = _passes(Path(tmp) / "broker.log")
        size_after = sum(p.stat().st_size for p in log_dir.glob("*.log"))
        mem = process_memory(broker.proc.pid)
        back = _read_table(broker.bootstrap, records, keys)
        config = BrokerConfig(data_dir="x", log_cleaner_dedupe_buffer_bytes=args.dedupe_mb * MIB)
        limit = bound(config, Load(connections=2, partitions=1,
                                   segments=size_before // segment + 2,
                                   request_bytes=PER_BATCH * args.record_bytes + 4096))
    read_mb = sum(p["bytes_read"] for p in passes) / MIB
    seconds = sum(p["seconds"] for p in passes)
    return {
        "records": records, "keys": keys, "record_bytes": args.record_bytes,
        "segment_mb": args.segment_mb, "produced_s": round(produced_s, 1),
        "passes": len(passes), "cleaned_mb": round(read_mb, 1),
        "written_mb": round(sum(p["bytes_written"] for p in passes) / MIB, 1),
        "clean_seconds": round(seconds, 2),
        "mb_per_s": round(read_mb / seconds, 1) if seconds else None,
        "log_mb_before": round(size_before / MIB, 1), "log_mb_after": round(size_after / MIB, 1),
        "covered_all": bool(passes) and passes[-1]["clean_point"] >= records,
        "read_back": back,
        "peak_rss_mb": round(mem.peak / MIB, 1), "bound_mb": round(limit.total / MIB, 1),
        "cleaner_term_mb": round(limit.terms["log cleaner"] / MIB, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.broker_compaction", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--total-mb", type=float, default=1024.0)
    ap.add_argument("--record-bytes", type=int, default=1024)
    ap.add_argument("--live-share", type=float, default=0.01)
    ap.add_argument("--segment-mb", type=float, default=64.0)
    ap.add_argument("--dedupe-mb", type=int, default=32)
    ap.add_argument("--timeout", type=float, default=1800.0, help="for the cleaner, seconds")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.record_bytes < 64 or not 0 < args.live_share <= 1:
        print("bench.broker_compaction: --record-bytes >= 64 and 0 < --live-share <= 1",
              file=sys.stderr)
        return 2
    started = time.monotonic()
    result = run(args)
    print(json.dumps(result, indent=2))
    write_result(args.out, result, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
