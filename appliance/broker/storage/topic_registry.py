"""The topic registry: create/delete/grow topics, look up partitions, and keep the whole
log within its retention and the broker's log budget."""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from appliance.broker.settings import BrokerConfig, BudgetPolicy
from appliance.broker.storage import log_budget, topic_configs
from appliance.broker.storage.batch_policy import BatchPolicy
from appliance.broker.storage.log_budget import EvictReason, LogBudget
from appliance.broker.storage.memory_log import MemoryLog
from appliance.broker.storage.partition import PartitionLog
from appliance.broker.storage.producer_ids import ProducerIds
from appliance.broker.storage.producer_state import ProducerStates, last_sequence
from appliance.broker.storage.segments import PartitionSegments, SegmentSettings, Storage
from appliance.broker.wire import errors
from appliance.broker.wire.codec import new_uuid
from appliance.broker.wire.compression import CONFIG_NAMES
from appliance.broker.wire.control_batch import COORDINATOR_EPOCH
from appliance.logs import get_logger

log = get_logger("appliance.broker")

# Kafka's legal topic names; fullmatch, so nothing may follow (not even a newline)
_LEGAL = re.compile(r"[a-zA-Z0-9._-]{1,249}")
# A full budget with nothing the policy may evict is looked at again after this long (or
# once the log shrank): not on every refused produce, each of which would scan every
# partition and group.
FULL_RECHECK_S = 0.1


class TopicRegistryError(Exception):
    """A topic operation the registry refuses (create, delete, add partitions, configs):
    ``code`` is the Kafka error code the answer carries, ``message`` says why. Named apart
    from ``appliance.topics.TopicError`` (the appliance's own topic setup)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Topic:
    name: str
    topic_id: bytes
    partitions: list[PartitionLog] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)


class Compaction(NamedTuple):
    """A compacted topic's cleaner settings (Kafka's names, in ms and a ratio)."""

    delete_retention_ms: int
    min_lag_ms: int
    max_lag_ms: int
    min_dirty_ratio: float


class TopicLimits(NamedTuple):
    """A topic's configs in force (its own over the broker's defaults)."""

    retention_bytes: int | None  # None: unlimited
    retention_ms: int | None  # None: unlimited
    max_message_bytes: int
    segment: SegmentSettings
    compression: str  # compression.type
    delete: bool  # cleanup.policy has delete: retention applies
    compaction: Compaction | None  # cleanup.policy has compact


def validate_name(name: str) -> None:
    if not _LEGAL.fullmatch(name) or name in (".", ".."):
        raise TopicRegistryError(errors.INVALID_TOPIC_EXCEPTION,
                         f"illegal topic name {name!r}: use 1-249 of [a-zA-Z0-9._-]")


def validate_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    try:
        return topic_configs.validate(configs)
    except topic_configs.TopicConfigError as exc:
        raise TopicRegistryError(errors.INVALID_CONFIG, str(exc)) from None


class TopicRegistry:
    def __init__(self, config: BrokerConfig, storage: Storage | None = None) -> None:
        self.config = config
        self.storage = storage
        self.topics: dict[str, Topic] = {}
        self.producer_ids = ProducerIds(config.data_dir, int(time.time() * 1000))
        self.budget = LogBudget(0, "")  # sized in recover(), once the log's size is known
        # (topic, partition) -> the offset every consumer group with a committed offset
        # there has read up to; None: no group commits there (its data is unread). Set by
        # whoever holds the groups' offsets (Apis).
        self.read_through: Callable[[str, int], int | None] = lambda _t, _p: None
        self._full_until = 0.0  # room_for found nothing to evict: until then (monotonic)
        self._full_used = 0  # ... unless the log shrank below this

    def _producers(self) -> ProducerStates:
        return ProducerStates(self.config.max_producers_per_partition,
                              self.config.producer_id_expiration_ms)

    def recover(self) -> None:
        """Rebuild every topic from the data directory after a restart (crash or clean),
        then size the log budget."""
        if self.storage is not None:
            self._recover_topics(self.storage)
            self.storage.recovered()
        sized = self._size_budget()  # the partitions hold this object: fill it in
        self.budget.limit, self.budget.source, self.budget.used = (sized.limit, sized.source,
                                                                   sized.used)

    def _size_budget(self) -> LogBudget:
        c = self.config
        used = sum(p.budget_bytes() for p in self.all_partitions())
        if c.retention_total_bytes is not None:
            return LogBudget(c.retention_total_bytes, "--retention-total-bytes", used)
        if self.storage is not None and c.data_dir is not None:
            return LogBudget(log_budget.disk_default(c.data_dir, used),
                             f"{int(log_budget.DISK_SHARE * 100)}% of the data directory's "
                             f"free space and log", used)
        return LogBudget(log_budget.memory_default(),
                         f"1/{log_budget.MEMORY_SHARE} of RAM, at most "
                         f"{log_budget.MEMORY_CAP >> 30} GiB", used)

    def _recover_topics(self, storage: Storage) -> None:
        for meta in storage.topic_metas():
            configs, ignored = topic_configs.stored(meta.get("configs", {}))
            if ignored:  # written by an older broker, which stored any name without effect
                log.warning("broker.topic_configs_ignored", topic=meta["name"],
                            configs=sorted(ignored))
            topic = Topic(meta["name"], bytes.fromhex(meta["topic_id"]), configs=configs)
            settings = self.limits(topic).segment
            read_through = 0
            for index in range(meta["partitions"]):
                segs, found = storage.recover_partition(topic.name, index, settings)
                part = PartitionLog(topic.name, index, segs, self.budget, self._producers())
                self._recover_producers(part, found.producer_snapshot, found.next_offset)
                part.recovered(found.next_offset, found.first_offset, found.log_start)
                read_through += found.batches_read
                topic.partitions.append(part)
            self.topics[topic.name] = topic
            log.info("broker.topic_recovered", topic=topic.name,
                     partitions=len(topic.partitions), batches_read=read_through,
                     high_watermarks=[p.high_watermark for p in topic.partitions])

    def _recover_producers(self, part: PartitionLog, snapshot: bytes | None,
                           next_offset: int) -> None:
        """The producer state as of the snapshot, and the batches after it replayed."""
        covered = 0
        if snapshot is not None:
            try:
                states, covered = ProducerStates.from_json(
                    snapshot, self.config.max_producers_per_partition,
                    self.config.producer_id_expiration_ms)
                if covered <= next_offset:
                    part.producers = states
                else:
                    covered = 0
            except ValueError as exc:
                log.warning("broker.producer_state_unreadable", topic=part.topic,
                            partition=part.index, error=str(exc))
        segs = part.segments
        if segs is None or covered >= next_offset:
            return
        for seg, batch in segs.batches_after(covered):
            h = batch.header
            if h.is_control:  # a transaction marker: its epoch fences older ones
                part.producers.fence(h.producer_id, h.producer_epoch, seg.last_append_ms,
                                     COORDINATOR_EPOCH)
            elif h.producer_id >= 0:
                part.producers.record(
                    h.producer_id, h.producer_epoch, h.base_sequence,
                    last_sequence(h.base_sequence, h.last_offset_delta), batch.base_offset,
                    seg.last_append_ms)

    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None,
               validate_only: bool = False) -> Topic:
        validate_name(name)
        if name in self.topics:
            raise TopicRegistryError(errors.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if partitions == -1:
            partitions = self.config.default_partitions
        if partitions < 1:
            raise TopicRegistryError(errors.INVALID_PARTITIONS,
                             f"partitions must be at least 1, got {partitions}")
        self._check_cap(name, partitions)
        checked = validate_configs(configs or {})
        topic = Topic(name, new_uuid(), configs=checked)
        if validate_only:
            return topic
        self._grow(topic, partitions)
        self.topics[name] = topic
        return topic

    def _check_cap(self, name: str, partitions: int) -> None:
        cap = self.config.max_partitions_per_topic
        if partitions > cap:
            raise TopicRegistryError(errors.POLICY_VIOLATION,
                             f"topic {name!r}: {partitions} partitions is more than this "
                             f"broker allows per topic ({cap}, --max-partitions-per-topic)")

    def _grow(self, topic: Topic, count: int) -> None:
        """Add partitions up to ``count``; with storage, only once their directories and
        the topic's metadata are on disk (a full disk refuses the whole change)."""
        new = range(len(topic.partitions), count)
        if self.storage is None:
            topic.partitions += [PartitionLog(topic.name, index, MemoryLog(), self.budget,
                                              self._producers()) for index in new]
            return
        try:
            segments = self.storage.open_partitions(topic.name, new,
                                                      self.limits(topic).segment)
            self.storage.save_topic(topic.name, topic.topic_id, count, topic.configs)
        except OSError as exc:
            self.storage.forget_partitions(topic.name, new)
            raise TopicRegistryError(errors.KAFKA_STORAGE_ERROR,
                             f"topic {topic.name!r}: cannot write its metadata: {exc}") from exc
        topic.partitions += [PartitionLog(topic.name, index, segs, self.budget,
                                          self._producers())
                             for index, segs in zip(new, segments, strict=True)]

    def add_partitions(self, name: str, count: int, validate_only: bool = False) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise TopicRegistryError(errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        if count <= len(topic.partitions):
            raise TopicRegistryError(errors.INVALID_PARTITIONS,
                             f"topic {name!r} has {len(topic.partitions)} partitions; "
                             f"new count {count} must be larger")
        self._check_cap(name, count)
        if not validate_only:
            self._grow(topic, count)

    def alter_configs(self, name: str, configs: Mapping[str, str | None],
                      validate_only: bool = False) -> None:
        """Replace a topic's configs (validated as a whole); in force at once."""
        topic = self.topics.get(name)
        if topic is None:
            raise TopicRegistryError(errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        checked = validate_configs(configs)
        if validate_only:
            return
        topic.configs = checked
        settings = self.limits(topic).segment
        for p in topic.partitions:
            if p.segments is not None:
                p.segments.settings = settings
        if self.storage is not None:
            self.storage.save_topic(topic.name, topic.topic_id, len(topic.partitions),
                                    topic.configs)
        log.info("broker.topic_configs_altered", topic=name, configs=checked)

    def delete(self, name: str) -> None:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise TopicRegistryError(errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        for p in topic.partitions:
            self.budget.sub(p.budget_bytes())
            for w in list(p.waiters):
                w.notify(0)
        if self.storage is not None:
            self.storage.delete_topic(name)

    def partition(self, name: str, index: int) -> PartitionLog | None:
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    def all_partitions(self) -> Iterator[PartitionLog]:
        for topic in self.topics.values():
            yield from topic.partitions

    def producer_snapshots(self) -> Callable[[PartitionSegments], bytes | None]:
        """For a clean stop: each partition's producer state as of its end."""
        by_store = {id(p.store): p for p in self.all_partitions()}

        def snapshot(segs: PartitionSegments) -> bytes | None:
            part = by_store.get(id(segs))
            return None if part is None else part.producers.to_json(part.high_watermark)

        return snapshot

    def maybe_auto_create(self, name: str) -> Topic | None:
        topic = self.topics.get(name)
        if topic is None and self.config.auto_create_topics:
            try:
                topic = self.create(name, self.config.default_partitions)
            except TopicRegistryError:
                return None
        return topic

    def limits(self, topic: Topic) -> TopicLimits:
        """The retention, size and segment limits in force for a topic."""
        c = self.config

        def _get(key: str, default):
            v = topic.configs.get(key)
            if v is None:
                return default
            n = int(v)
            return None if n < 0 and key.startswith("retention.") else n

        segment_ms = _get("segment.ms", c.segment_ms)
        jitter = min(_get("segment.jitter.ms", 0), segment_ms - 1)
        if jitter > 0:  # the same for a topic every time: its partitions roll apart
            segment_ms -= zlib.crc32(topic.name.encode()) % jitter
        segment = SegmentSettings(
            segment_bytes=_get("segment.bytes", c.segment_bytes),
            segment_ms=segment_ms,
            index_interval_bytes=_get("index.interval.bytes",
                                      topic_configs.DEFAULT_INDEX_INTERVAL_BYTES),
            segment_index_bytes=_get("segment.index.bytes",
                                     topic_configs.DEFAULT_SEGMENT_INDEX_BYTES))
        policy = {p.strip().lower()
                  for p in (topic.configs.get("cleanup.policy") or "delete").split(",")}
        compaction = None
        if "compact" in policy:
            defaults = topic_configs.BY_NAME
            compaction = Compaction(
                int(_get("delete.retention.ms",
                         int(defaults["delete.retention.ms"].default(c)))),
                int(_get("min.compaction.lag.ms",
                         int(defaults["min.compaction.lag.ms"].default(c)))),
                int(_get("max.compaction.lag.ms",
                         int(defaults["max.compaction.lag.ms"].default(c)))),
                float(topic.configs.get("min.cleanable.dirty.ratio")
                      or defaults["min.cleanable.dirty.ratio"].default(c)))
        return TopicLimits(_get("retention.bytes", c.retention_bytes),
                           _get("retention.ms", c.retention_ms),
                           _get("max.message.bytes", c.max_message_bytes), segment,
                           (topic.configs.get("compression.type") or "producer").lower(),
                           "delete" in policy, compaction)

    def batch_policy(self, topic: Topic) -> BatchPolicy:
        limits = self.limits(topic)
        codec = CONFIG_NAMES.get(limits.compression)  # None for "producer"
        return BatchPolicy(limits.max_message_bytes, self.config.max_decompressed_bytes,
                           codec, self.config.verify_produce_crc,
                           keys_required=limits.compaction is not None)

    # -- retention and the budget ------------------------------------------------------

    def enforce_retention(self) -> int:
        """Each topic's retention, then the budget; returns the bytes freed."""
        now = int(time.time() * 1000)
        freed = 0
        for topic in self.topics.values():
            limits = self.limits(topic)
            keep_all = not limits.delete  # compact only: retention deletes nothing
            for p in topic.partitions:
                freed += p.enforce_retention(now, None if keep_all else limits.retention_bytes,
                                             None if keep_all else limits.retention_ms)
        return freed + self.enforce_budget()

    def enforce_budget(self, incoming: int = 0) -> int:
        """While the log (with ``incoming`` bytes more) is over its budget, free the
        oldest data the policy lets it take, a slice at a time: what every consumer group
        has read first, oldest first; then, under keep-newest only, the oldest of the
        rest. Each eviction is logged at WARN and counted by reason. Returns the bytes
        freed."""
        budget = self.budget
        freed = 0
        step = max(budget.limit // 64, 1)
        while budget.used + incoming > budget.limit:
            victim = self._victim()
            if victim is None:
                break
            part, below, reason = victim
            start = part.log_start_offset
            got = part.evict(budget.used + incoming - budget.limit + step, below)
            if not got:
                break
            freed += got
            budget.evicted[reason] += got
            log.warning("broker.log_evicted", topic=part.topic, partition=part.index,
                        reason=reason, freed_bytes=got, from_offset=start,
                        log_start=part.log_start_offset, limit_bytes=budget.limit,
                        used_bytes=budget.used, policy=self.config.retention_total_policy.value)
        return freed

    def _victim(self) -> tuple[PartitionLog, int | None, str] | None:
        """(partition, the offset eviction must stay below, reason) of the oldest data
        the policy lets the budget take; None: nothing."""
        read: tuple[int, PartitionLog, int] | None = None
        unread: tuple[int, PartitionLog] | None = None
        keep_newest = self.config.retention_total_policy is BudgetPolicy.KEEP_NEWEST
        for p in self.all_partitions():
            end = p.oldest_end()
            appended = p.oldest_append_ms()
            if end is None or appended is None:
                continue
            bound = self.read_through(p.topic, p.index)
            if bound is not None and end <= bound:
                if read is None or appended < read[0]:
                    read = (appended, p, bound)
            elif keep_newest and (unread is None or appended < unread[0]):
                unread = (appended, p)
        if read is not None:
            return read[1], read[2], EvictReason.READ
        if unread is not None:
            return unread[1], None, EvictReason.UNREAD
        return None

    def room_for(self, nbytes: int) -> bool:
        """Whether an append of ``nbytes`` fits the budget, evicting what the policy
        allows first. keep-newest always makes room (it evicts the rest after)."""
        budget = self.budget
        if budget.used + nbytes <= budget.limit:
            return True
        now = time.monotonic()
        if now < self._full_until and budget.used >= self._full_used:
            return False  # nothing was evictable a moment ago: no rescan per produce
        self.enforce_budget(nbytes)
        if self.config.retention_total_policy is BudgetPolicy.KEEP_NEWEST:
            return True
        if budget.used + nbytes <= budget.limit:
            return True
        self._full_until, self._full_used = now + FULL_RECHECK_S, budget.used
        return False
