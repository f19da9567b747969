"""Where a lone real-time instance's next query starts: at its durable progress, not at the
start of the batch a crash interrupted (``appliance.query.progress_file`` says why).

``LoneProgress`` keeps the query's processed offsets (``QueryProbes.processed``: the
checkpoint's newest commit merged with the connector's durable marks) in the checkpoint
at most once a second while the instance serves. Before a query starts it turns them into
the query's start when they are ahead of the checkpoint's newest commit: the checkpoint is
moved aside (``<dir>.stale``, as a pair's takeover does) and the query starts at exactly
those offsets. Only for triggers whose progress comes from marks
(``ProcessedFrom.CHECKPOINT_AND_MARKS``) and without ``[ha]``: a pair starts from its
offsets in Kafka.

Kept offsets count only if they name every partition of the events topic and none lies
past the partition's end (a topic deleted and made again starts at 0): otherwise the
checkpoint decides, as before, and ``query.progress_ignored`` says why.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafka import TopicPartition

from appliance import logs
from appliance.ha.kafka_offsets import reset_checkpoint, starting_offsets
from appliance.query import progress_file
from appliance.query.checkpoint import committed_offsets
from appliance.topics import offsets_consumer
from appliance.trigger import ProcessedFrom, TriggerMode

if TYPE_CHECKING:
    from appliance.process.query_probes import QueryProbes
    from appliance.process.run_settings import RunSettings

#: How often the processed offsets are kept: what a crash re-reads beyond the marks' own
#: lag (200 ms) at most.
SAVE_EVERY_S = 1.0

log = logs.get_logger("appliance")


class LoneProgress:
    """One lone real-time instance's kept progress (see the module's docstring)."""

    def __init__(self, processed: Callable[[str], dict[int, int]], topic: str,
                 checkpoint_dir: str, client: Callable[[], dict]) -> None:
        self.processed, self.topic = processed, topic
        self.checkpoint_dir, self.client = checkpoint_dir, client
        self._saved: dict[int, int] = {}
        self._next_save = 0.0
        self._save_failed = False

    @classmethod
    def for_run(cls, mode: TriggerMode, probes: QueryProbes,
                settings: RunSettings) -> LoneProgress | None:
        """A lone instance's (no ``[ha]``: the caller's check), where ``mode`` has marks."""
        if mode.processed_from is not ProcessedFrom.CHECKPOINT_AND_MARKS:
            return None
        config = settings.config
        return cls(probes.processed, config.topics.events, config.query.checkpoint_dir,
                   settings.client)

    def save(self) -> None:
        """Keep the processed offsets if a second has passed and they moved."""
        now = time.monotonic()
        if now < self._next_save:
            return
        self._next_save = now + SAVE_EVERY_S
        try:
            offsets = self.processed(self.topic)
        except Exception:  # noqa: BLE001 - the JVM went away: serve() reports that
            return
        if not offsets or offsets == self._saved:
            return
        try:
            progress_file.save(self.checkpoint_dir, self.topic, offsets)
        except OSError as exc:
            if not self._save_failed:  # once: a full disk would say it every second
                log.warning("query.progress_save_failed", error=str(exc)[:300],
                            consequence="a restart after a crash replays the running batch")
            self._save_failed = True
            return
        self._saved, self._save_failed = offsets, False

    def resume(self, partitions: int) -> str | None:
        """The next query's ``startingOffsets`` if the kept progress is ahead of the
        checkpoint (which is then moved aside); None: the checkpoint decides."""
        kept = progress_file.load(self.checkpoint_dir, self.topic)
        committed = committed_offsets(self.checkpoint_dir).get(self.topic, {})
        if not any(o > committed.get(p, -1) for p, o in kept.items()):
            return None
        if set(kept) != set(range(partitions)):
            self._ignored(kept, "it does not name every partition of the topic")
            return None
        consumer = offsets_consumer(self.client())
        try:
            ends = {tp.partition: o for tp, o in consumer.end_offsets(
                [TopicPartition(self.topic, p) for p in range(partitions)]).items()}
        finally:
            consumer.close()
        if any(o > ends.get(p, -1) for p, o in kept.items()):
            self._ignored(kept, "past the topic's end offsets (made again since?)")
            return None
        start = {p: max(o, committed.get(p, -1)) for p, o in kept.items()}
        moved = reset_checkpoint(self.checkpoint_dir)
        log.info("query.resume_from_progress", topic=self.topic,
                 offsets={str(p): o for p, o in sorted(start.items())},
                 checkpoint_committed={str(p): o for p, o in sorted(committed.items())},
                 stale_checkpoint=str(moved) if moved else None)
        return starting_offsets(self.topic, start, partitions)

    def _ignored(self, kept: dict[int, int], reason: str) -> None:
        log.warning("query.progress_ignored", topic=self.topic, reason=reason,
                    offsets={str(p): o for p, o in sorted(kept.items())})
