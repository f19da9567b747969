"""The broker's memory bound: what its resident memory can be, as a formula of its settings
and of what it serves (connections, partitions, segments, groups), never of the data.

The log is not in it: with ``--data-dir`` records are served from the segment files (the
page cache holds them, outside the process), and in memory they are capped by the log
budget (``--retention-total-bytes``), which is then a term. Everything else is either
fixed, or per connection, per partition, per segment, per group, each term bounded by a
setting. Consumer groups, of both protocols, are ``--max-groups`` at most, each of at
most ``--group-max-size`` members; what clients decide the size of (classic members'
metadata and assignments, KIP-848 members' subscriptions) is capped by
``--group-max-metadata-bytes`` a group and ``--groups-max-metadata-bytes`` in all; a
KIP-848 group's assignment (computed here) by the partitions; committed offsets by
groups times partitions (a commit of an unknown partition is refused). The
per-connection term is what one connection may make the broker hold at
once: a partial request frame (larger ones come from the shared request pool), one read
from its socket, one response being sent (``WRITE_HIGH`` unsent, then the piece being
written), one parked request (a long-poll fetch, a rebalance; at most ``MAX_ITEMS``
items). docs/broker.md ("Memory") states the same formula; tests/broker/test_memory_bound.py and
``bench.broker_soak`` measure the peak against ``bound``.

``server`` takes its write-side constants from here, so the formula and the mechanism
are one set of numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.broker.connections.request_pool import SMALL_FRAME
from appliance.broker.settings import BrokerConfig
from appliance.broker.storage.log_budget import memory_default
from appliance.broker.storage.segment_file import STREAM_CHUNK
from appliance.broker.wire.request_limits import MAX_ITEMS

MIB = 1 << 20
KIB = 1 << 10

# A connection's response: written until WRITE_HIGH is left unsent in the transport (the
# connection then counts as busy and is not read), resumed below WRITE_LOW; large
# responses go out a piece at a time, small parts joined up to STREAM_RUN.
WRITE_HIGH = 256 * KIB
WRITE_LOW = 64 * KIB
STREAM_RUN = 64 * KIB
READ_CHUNK = 256 * KIB  # the most one socket read hands the broker (uvloop)

# Measured (docs/broker.md, "Memory"): the interpreter, the broker's code and its tables,
# idle, with nothing served: 43 MiB on CPython 3.11; rounded up, with the authorizer's
# decision cache (50,000 entries) and the metrics endpoint.
BASE = 64 * MIB
CONNECTION_STATE = 16 * KIB  # objects, timers, transport (4.5 KiB measured idle)
PARKED_ITEM = 160  # one partition (or group, topic) of a parked request, decoded
PARTITION_STATE = 4 * KIB  # log object, store, arrays, tail ring (1.3-2.7 KiB measured)
PRODUCER_STATE = 640  # one idempotent producer remembered by a partition
SEGMENT_STATE = 2 * KIB  # a segment's numbers and index handle (and one descriptor)
# Groups (tests/broker/test_memory_bound.py: 60 KIP-848 groups of 10 members over 150
# one-partition topics and 60 classic groups of 150 committed offsets grew the broker
# 15.9 MiB, where these terms allow 31 MiB)
GROUP_STATE = 4 * KIB  # a group without its members
MEMBER_STATE = 4 * KIB  # a member, without its metadata or subscription
# a partition in a KIP-848 group's assignment: in the target, the owner's assignment (or
# revocation) and the saved snapshot of both, at worst one partition per topic
ASSIGNED_PARTITION = 1 * KIB
COMMITTED_OFFSET = 320  # one committed (group, topic, partition) offset


def per_connection(config: BrokerConfig) -> int:
    """The most one connection makes the broker hold (its request frames past
    ``SMALL_FRAME`` are in the shared request pool instead)."""
    largest_part = max(STREAM_CHUNK, STREAM_RUN, config.max_message_bytes)
    return (CONNECTION_STATE + SMALL_FRAME + READ_CHUNK + WRITE_HIGH + largest_part
            + MAX_ITEMS * PARKED_ITEM)


@dataclass(frozen=True)
class Load:
    """What the broker serves; each defaults to its setting's limit, if it has one."""

    connections: int
    partitions: int
    segments: int  # with --data-dir
    request_bytes: int  # the largest request frame being handled (Produce: its size)
    producers_per_partition: int | None = None  # None: --max-producers-per-partition
    groups: int = 0  # at most --max-groups, classic and KIP-848 together
    members: int = 0  # at most groups x --group-max-size
    committed_offsets: int = 0  # at most groups x partitions


@dataclass(frozen=True)
class Bound:
    terms: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.terms.values())

    def describe(self) -> str:
        return ", ".join(f"{name} {value / MIB:.1f} MiB" for name, value in self.terms.items()
                         if value)


def bound(config: BrokerConfig, load: Load) -> Bound:
    producers = (config.max_producers_per_partition if load.producers_per_partition is None
                 else load.producers_per_partition)
    in_memory = config.data_dir is None
    terms = {
        "fixed": BASE,
        # a request being handled: its frame, the copy it is parsed from, and the batches
        # rewritten with their offsets; one at a time (the event loop is one thread)
        "request": 3 * load.request_bytes,
        # decompression (ListOffsets by time, compression.type): one batch at a time
        "decompression": config.max_decompressed_bytes,
        "request pool": min(config.queued_max_request_bytes,
                            load.connections * load.request_bytes),
        "connections": load.connections * per_connection(config),
        "partitions": load.partitions * (PARTITION_STATE + producers * PRODUCER_STATE),
        "segments": load.segments * SEGMENT_STATE,
        # groups, their members, and the members' metadata (classic) or subscriptions
        # (KIP-848) under the metadata caps; a KIP-848 group's assignment by partitions
        "groups": load.groups * (GROUP_STATE + load.partitions * ASSIGNED_PARTITION)
        + load.members * MEMBER_STATE
        + min(config.groups_max_metadata_bytes, load.groups * config.group_max_metadata_bytes),
        "committed offsets": load.committed_offsets * COMMITTED_OFFSET,
        # in memory the log itself: the budget counts each batch's bookkeeping too
        # (memory_log.BATCH_OVERHEAD), and may run over by one produce before the oldest
        # goes
        # with --data-dir, a compaction pass (storage/cleaner.py): its key map, one batch
        # decompressed and the batch rebuilt from it
        "log cleaner": (config.log_cleaner_dedupe_buffer_bytes + config.max_decompressed_bytes
                        + config.max_message_bytes) if not in_memory else 0,
        "log (in memory)": (memory_default() if config.retention_total_bytes is None
                            else config.retention_total_bytes) + load.request_bytes
        if in_memory else 0,
    }
    return Bound(terms)
