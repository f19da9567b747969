"""The age of the oldest unread event per partition, as kminion and Burrow show it.

Consumer lag in records says how much waits, not how long: divided by the read rate it
becomes a drain estimate, which reads about a thousand times the backlog while the query
is stalled (the rate is near zero) and tells an operator nothing about the delay the
oldest waiting event has already suffered. The age does: now minus the Kafka timestamp of
the next record the query will read (its committed offset), 0 when the query has
committed everything. While the query is stopped it grows by one second per second,
whatever the rate.

A record's timestamp is only in the record, so it takes a fetch: one small fetch per
partition whose committed offset moved since the last look (a stalled query costs no
fetch at all, its offsets stay put). The timestamp is the producer's create time (or the
log-append time of a topic configured so); a producer's clock ahead of this host's reads
as age 0, never as a negative age.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from kafka import KafkaConsumer, TopicPartition

# A fetch answers at once when the record is there (it is: the offset is below the end);
# the bound only matters when the broker is slow, and keeps one poll of the metrics short.
FETCH_TIMEOUT_S = 0.8
# Only the first record of each partition is wanted: small fetches.
_PARTITION_FETCH_BYTES = 16 * 1024


class PartitionKey(NamedTuple):
    topic: str
    partition: int


class _Seen(NamedTuple):
    offset: int
    timestamp_ms: float


class NextRecordTimes:
    """Kafka timestamps of the records at given offsets, cached per (partition, offset)."""

    def __init__(self, client_config: dict, timeout_s: float = FETCH_TIMEOUT_S) -> None:
        self.client_config = client_config
        self.timeout_s = timeout_s
        self._consumer: KafkaConsumer | None = None
        self._seen: dict[PartitionKey, _Seen] = {}

    def _client(self) -> KafkaConsumer:
        if self._consumer is None:
            self._consumer = KafkaConsumer(**{
                **self.client_config, "group_id": None, "enable_auto_commit": False,
                # An offset below the log start (retention deleted it): the oldest record
                # that is still there is the next one the query will get.
                "auto_offset_reset": "earliest",
                "max_partition_fetch_bytes": _PARTITION_FETCH_BYTES,
                "fetch_max_bytes": 4 * _PARTITION_FETCH_BYTES,
                "fetch_max_wait_ms": 100})
        return self._consumer

    def timestamps(self, offsets: dict[PartitionKey, int]) -> dict[PartitionKey, float]:
        """Epoch milliseconds of the record at each offset; a partition whose record could
        not be fetched within the timeout (or has no timestamp) is left out."""
        wanted = {key: offset for key, offset in offsets.items()
                  if key not in self._seen or self._seen[key].offset != offset}
        if wanted:
            self._fetch(wanted)
        self._seen = {key: seen for key, seen in self._seen.items() if key in offsets}
        return {key: self._seen[key].timestamp_ms for key, offset in offsets.items()
                if key in self._seen and self._seen[key].offset == offset}

    def _fetch(self, wanted: dict[PartitionKey, int]) -> None:
        consumer = self._client()
        tps = {TopicPartition(key.topic, key.partition): key for key in wanted}
        consumer.assign(list(tps))
        for tp, key in tps.items():
            consumer.seek(tp, wanted[key])
        pending = set(tps)
        deadline = time.monotonic() + self.timeout_s
        while pending and (left := deadline - time.monotonic()) > 0:
            # Only each partition's first record is wanted; the rest of a (small) fetch is
            # dropped. (Not paused instead: kafka-python keeps a paused partition's
            # buffered records, and fetches nothing more for it after a seek.)
            for tp, records in consumer.poll(timeout_ms=int(left * 1000) + 1).items():
                if tp in pending and records:
                    pending.discard(tp)
                    if records[0].timestamp is not None and records[0].timestamp >= 0:
                        self._seen[tps[tp]] = _Seen(wanted[tps[tp]],
                                                    float(records[0].timestamp))

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def lag_ages(ends: dict[int, int], committed: dict[int, int], topic: str,
             times: NextRecordTimes, now: float | None = None) -> dict[PartitionKey, float]:
    """Seconds per partition of ``topic``: 0 when caught up (committed >= end), else now
    minus the timestamp of the record at the committed offset (left out if unknown)."""
    behind = {PartitionKey(topic, part): committed.get(part, 0)
              for part, end in ends.items() if end > committed.get(part, 0)}
    stamps = times.timestamps(behind)
    now = time.time() if now is None else now
    out = {PartitionKey(topic, part): 0.0 for part in ends
           if PartitionKey(topic, part) not in behind}
    out.update({key: max(0.0, now - stamp / 1000.0) for key, stamp in stamps.items()})
    return out
