"""The topic registry: create/delete/grow topics and look up partitions."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from appliance.broker.settings import BrokerConfig
from appliance.broker.storage import topic_configs
from appliance.broker.storage.partition import PartitionLog
from appliance.broker.storage.segments import Storage
from appliance.broker.wire import errors
from appliance.broker.wire.codec import new_uuid
from appliance.logs import get_logger

log = get_logger("appliance.broker")

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class TopicError(Exception):
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


class TopicLimits(NamedTuple):
    retention_bytes: int | None  # None: unlimited
    retention_ms: int | None  # None: unlimited
    max_message_bytes: int
    segment_bytes: int


def validate_name(name: str) -> None:
    if not _LEGAL.match(name) or name in (".", ".."):
        raise TopicError(errors.INVALID_TOPIC_EXCEPTION,
                         f"illegal topic name {name!r}: use 1-249 of [a-zA-Z0-9._-]")


def validate_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    try:
        return topic_configs.validate(configs)
    except topic_configs.ConfigError as exc:
        raise TopicError(errors.INVALID_CONFIG, str(exc)) from None


class TopicRegistry:
    def __init__(self, config: BrokerConfig, storage: Storage | None = None) -> None:
        self.config = config
        self.storage = storage
        self.topics: dict[str, Topic] = {}

    def recover(self) -> None:
        """Rebuild every topic from the data directory after a restart (crash or clean)."""
        if self.storage is None:
            return
        for found in self.storage.recover():
            configs, ignored = topic_configs.stored(found.configs)
            if ignored:  # written by an older broker, which stored any name without effect
                log.warning("broker.topic_configs_ignored", topic=found.name,
                            configs=sorted(ignored))
            topic = Topic(found.name, found.topic_id, configs=configs)
            batches = 0
            for recovered in found.partitions:
                part = PartitionLog(topic.name, recovered.index, recovered.segments)
                for b in recovered.segments.recover():
                    end = b.base_offset + b.header.last_offset_delta
                    part.load(b.batch, b.header, b.base_offset, b.written_ms,
                              expired=end < recovered.log_start)
                    batches += 1
                part.recovered_log_start(recovered.log_start)
                recovered.segments.segment_bytes = self.limits(topic).segment_bytes
                topic.partitions.append(part)
            self.topics[topic.name] = topic
            log.info("broker.topic_recovered", topic=topic.name,
                     partitions=len(topic.partitions), batches=batches,
                     high_watermarks=[p.high_watermark for p in topic.partitions])

    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None,
               validate_only: bool = False) -> Topic:
        validate_name(name)
        if name in self.topics:
            raise TopicError(errors.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if partitions == -1:
            partitions = self.config.default_partitions
        if partitions < 1:
            raise TopicError(errors.INVALID_PARTITIONS,
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
            raise TopicError(errors.POLICY_VIOLATION,
                             f"topic {name!r}: {partitions} partitions is more than this "
                             f"broker allows per topic ({cap}, --max-partitions-per-topic)")

    def _grow(self, topic: Topic, count: int) -> None:
        """Add partitions up to ``count``; with storage, only once their directories and
        the topic's metadata are on disk (a full disk refuses the whole change)."""
        new = range(len(topic.partitions), count)
        if self.storage is None:
            topic.partitions += [PartitionLog(topic.name, index) for index in new]
            return
        try:
            segments = self.storage.open_partitions(topic.name, new,
                                                      self.limits(topic).segment_bytes)
            self.storage.save_topic(topic.name, topic.topic_id, count, topic.configs)
        except OSError as exc:
            self.storage.forget_partitions(topic.name, new)
            raise TopicError(errors.KAFKA_STORAGE_ERROR,
                             f"topic {topic.name!r}: cannot write its metadata: {exc}") from exc
        topic.partitions += [PartitionLog(topic.name, index, segs)
                             for index, segs in zip(new, segments, strict=True)]

    def add_partitions(self, name: str, count: int, validate_only: bool = False) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        if count <= len(topic.partitions):
            raise TopicError(errors.INVALID_PARTITIONS,
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
            raise TopicError(errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        checked = validate_configs(configs)
        if validate_only:
            return
        topic.configs = checked
        segment_bytes = self.limits(topic).segment_bytes
        for p in topic.partitions:
            if p.segments is not None:
                p.segments.segment_bytes = segment_bytes
        if self.storage is not None:
            self.storage.save_topic(topic.name, topic.topic_id, len(topic.partitions),
                                    topic.configs)
        log.info("broker.topic_configs_altered", topic=name, configs=checked)

    def delete(self, name: str) -> None:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise TopicError(errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        for p in topic.partitions:
            for w in list(p.waiters):
                w.notify(0)
        if self.storage is not None:
            self.storage.delete_topic(name)

    def partition(self, name: str, index: int) -> PartitionLog | None:
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    def maybe_auto_create(self, name: str) -> Topic | None:
        topic = self.topics.get(name)
        if topic is None and self.config.auto_create_topics:
            try:
                topic = self.create(name, self.config.default_partitions)
            except TopicError:
                return None
        return topic

    def limits(self, topic: Topic) -> TopicLimits:
        """The retention and size limits in force for a topic (its configs over defaults)."""
        c = self.config

        def _get(key: str, default):
            v = topic.configs.get(key)
            if v is None:
                return default
            n = int(v)
            return None if n < 0 and key.startswith("retention.") else n

        return TopicLimits(_get("retention.bytes", c.retention_bytes),
                           _get("retention.ms", c.retention_ms),
                           _get("max.message.bytes", c.max_message_bytes),
                           _get("segment.bytes", c.segment_bytes))

    def enforce_retention(self) -> int:
        now = int(time.time() * 1000)
        dropped = 0
        for topic in self.topics.values():
            limits = self.limits(topic)
            if limits.retention_bytes is None and limits.retention_ms is None:
                continue
            for p in topic.partitions:
                dropped += p.enforce_retention(now, limits.retention_bytes, limits.retention_ms)
        return dropped

    def max_producer_id(self) -> int:
        return max((p.producers.max_producer_id() for t in self.topics.values()
                    for p in t.partitions), default=-1)
