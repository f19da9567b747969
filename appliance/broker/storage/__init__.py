"""The log: topics, partitions, their batches in memory and, with ``--data-dir``, on disk.

The topic registry (``topic_registry``) creates, grows and deletes topics, each with its
configs (``topic_configs``, the table of what each Kafka topic setting does here); a
partition (``partition``) keeps its batches in offset order with idempotent producers'
state (``producer_state``) and wakes parked fetches (``fetch_wait``); segment files
(``segments``, read back by ``segment_scan``) make it durable, through the few fsyncing
file operations in ``durable_io``. Why a room: none of it knows a request, a connection or
a consumer group; the handlers above call it.
"""
