"""What a produced batch must be before a partition takes it: one policy, per topic.

Kafka's broker validates every batch it appends; clients depend on it (a consumer that
meets a batch whose CRC does not match stops at that offset for good, and so would every
other consumer of the partition). So, in this order, a batch is refused when it is:

- larger than the topic's ``max.message.bytes``: MESSAGE_TOO_LARGE;
- a control batch (transaction markers are the broker's to write): INVALID_RECORD;
- damaged: its CRC-32C does not match its bytes: CORRUPT_MESSAGE;
- claiming more records than its bytes can hold (a record is at least 7 bytes; for a
  compressed batch, of the decompressed bytes the broker allows): CORRUPT_MESSAGE;
- from a producer id this broker did not issue: UNKNOWN_PRODUCER_ID;
- for a compacted topic, holding a record without a key: INVALID_RECORD, as Kafka
  refuses it (the records are walked: on the event loop when uncompressed, on the
  slicer's thread otherwise, ``keys_checked_later``).

A transactional batch passes here; whether its producer holds an ongoing transaction with
the partition is the transaction coordinator's to say (``txn.coordinator``).

The CRC check costs about a microsecond for a small batch and 0.2 ms per MiB (CRC-32C in
hardware); ``verify_crc`` exists only so the bench can measure that
(``--unsafe-skip-produce-crc``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from appliance.broker.storage import compact_batch
from appliance.broker.storage.producer_ids import ProducerIds
from appliance.broker.wire import errors
from appliance.broker.wire.compression import Codec, CompressionError
from appliance.broker.wire.records import HEADER_SIZE, MIN_RECORD_BYTES, BatchHeader, crc_ok


class Refusal(NamedTuple):
    error: int
    message: str


KEYLESS = Refusal(errors.INVALID_RECORD,
                  "Compacted topic cannot accept message without key")


@dataclass(frozen=True)
class BatchPolicy:
    max_message_bytes: int
    max_decompressed_bytes: int
    compression: Codec | None  # the topic's compression.type; None: the producer's
    verify_crc: bool = True
    keys_required: bool = False  # a compacted topic: every record needs a key

    @property
    def needs_worker(self) -> bool:
        """Batches of this topic may need the slicer's thread (recompression, or the key
        check of a compressed batch)."""
        return self.compression is not None or self.keys_required

    def keys_checked_later(self, header: BatchHeader) -> bool:
        """A compressed batch of a compacted topic: its keys are checked on the slicer."""
        return self.keys_required and bool(header.codec)

    def refusal(self, header: BatchHeader, batch: memoryview,
                producer_ids: ProducerIds) -> Refusal | None:
        if header.size > self.max_message_bytes:
            return Refusal(errors.MESSAGE_TOO_LARGE,
                           f"record batch of {header.size} bytes is larger than "
                           f"max.message.bytes={self.max_message_bytes}")
        if header.is_control:
            return Refusal(errors.INVALID_RECORD,
                           "control batches are written by the broker, not by clients")
        if self.verify_crc and not crc_ok(batch):
            return Refusal(errors.CORRUPT_MESSAGE,
                           "record batch CRC-32C does not match its bytes")
        room = (self.max_decompressed_bytes if header.codec
                else header.size - HEADER_SIZE)
        if header.record_count > room // MIN_RECORD_BYTES:
            return Refusal(errors.CORRUPT_MESSAGE,
                           f"record batch claims {header.record_count} records in "
                           f"{room} bytes of records")
        if header.producer_id >= 0 and not producer_ids.issued(header.producer_id):
            return Refusal(errors.UNKNOWN_PRODUCER_ID,
                           f"producer id {header.producer_id} was not issued by this broker "
                           f"(InitProducerId gives one)")
        if self.keys_required and not header.codec and compact_batch.keyless(
                batch[HEADER_SIZE:header.size], header.record_count):
            return KEYLESS
        return None

    def recompress_to(self, header: BatchHeader) -> Codec | None:
        """The codec the batch must be rewritten in, None if it is stored as received."""
        if self.compression is None or header.codec == self.compression:
            return None
        return self.compression


def keys_refusal(batch: bytes | memoryview, limit: int) -> Refusal | None:
    """The key check of a compressed batch of a compacted topic (on the slicer's thread):
    decompresses at most ``limit`` bytes."""
    try:
        return KEYLESS if compact_batch.batch_keyless(batch, limit) else None
    except CompressionError as exc:
        return Refusal(errors.CORRUPT_MESSAGE, f"cannot decompress the batch: {exc}")
