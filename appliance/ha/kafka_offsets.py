"""The events topic's processed offsets in Kafka: where a taking-over instance starts.

The active instance commits them to the pair's consumer group (``election``) after the
sink committed the epoch or batch that read them, so they are at most one commit period
behind what was processed: a new active re-reads at most that window (duplicates, never
a gap). It starts from them, not from its own checkpoint, which is as old as the last
time this instance served: that checkpoint is moved aside (``reset_checkpoint``) and the
query starts with ``startingOffsets`` naming every partition.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

from kafka import KafkaConsumer, TopicPartition

#: ``startingOffsets`` for a partition Kafka has no committed offset of (Spark's JSON).
EARLIEST = -2


def group_offsets(client_config: dict, group: str, topic: str,
                  partitions: int) -> dict[int, int]:
    """The offsets ``group`` has committed for ``topic``'s partitions (missing: none)."""
    reader = PairOffsets(client_config, group, topic)
    try:
        return reader.read(range(partitions))
    finally:
        reader.close()


class PairOffsets:
    """The pair's processed offsets of the events topic, read again on each call: what a
    pair's instances count their lag from (``MetricsPoller``'s ``processed``), so both
    show the pair's lag, the same one ``kafka-consumer-groups --describe`` shows, and a
    waiting standby shows no stale figure of its own. One consumer, kept between calls
    (the metrics poll every second); it never joins the group, it only reads offsets."""

    def __init__(self, client_config: dict, group: str, topic: str) -> None:
        self.topic = topic
        self._consumer = KafkaConsumer(**{**client_config, "group_id": group,
                                          "enable_auto_commit": False})

    def __call__(self) -> dict[int, int]:
        return self.read(sorted(self._consumer.partitions_for_topic(self.topic) or ()))

    def read(self, partitions: Iterable[int]) -> dict[int, int]:
        """The committed offset of each of ``partitions`` that has one."""
        out = {}
        for part in partitions:
            committed = self._consumer.committed(TopicPartition(self.topic, part))
            if committed is not None and committed >= 0:
                out[part] = int(committed)
        return out

    def close(self) -> None:
        self._consumer.close(autocommit=False)


def first_start(spec: str, ends: dict[int, int],
                beginnings: dict[int, int]) -> dict[int, int]:
    """``[query] starting_offsets`` (``latest`` or ``earliest``) as the offset of each
    partition now: where a pair's first active starts, said to Kafka before it serves."""
    return dict(ends if spec == "latest" else beginnings)


def starting_offsets(topic: str, committed: dict[int, int], partitions: int) -> str:
    """``startingOffsets`` JSON: the committed offset of each partition, earliest where
    none was committed (a partition added since, or one that never had an event)."""
    return json.dumps({topic: {str(p): committed.get(p, EARLIEST) for p in range(partitions)}})


def reset_checkpoint(checkpoint_dir: str | Path) -> Path | None:
    """Move this instance's stale checkpoint aside (``<dir>.stale``, the last
    one only: the one before is removed); the moved path, None if there was none."""
    path = Path(checkpoint_dir)
    if not path.exists():
        return None
    aside = path.with_name(f"{path.name}.stale")
    if aside.exists():
        shutil.rmtree(aside)
    path.rename(aside)
    (aside / "moved_at").write_text(f"{time.time():.3f}\n", encoding="utf-8")
    return aside
