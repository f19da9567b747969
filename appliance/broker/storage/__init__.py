"""The log: topics, partitions, their batches in memory or, with ``--data-dir``, on disk.

The topic registry (``topic_registry``) creates, grows and deletes topics, each with its
configs (``topic_configs``, the table of what each Kafka topic setting does here), and
keeps the whole log within retention and the broker's budget (``log_budget``); a
partition (``partition``) assigns offsets, checks batches against its topic's policy
(``batch_policy``) and idempotent producers' state (``producer_state``, ids from
``producer_ids``), and wakes parked fetches (``fetch_wait``). Its store is
``memory_log`` (batches in compact arrays) or ``segments``: segment files
(``segment_file``, Kafka's layout, each with a sparse ``offset_index``), read back by
``batch_scan`` (an older broker's framed files by ``framed_scan``, once), made durable
through the few fsyncing file operations in ``durable_io``. ``timestamp_search`` answers
ListOffsets by time without stalling. Compacted topics on disk are cleaned by
``log_cleaner`` (when and where), ``cleaner`` (one pass, on its own thread, records
walked by ``compact_batch``) and ``cleaned_swap`` (its files put in place,
crash-safely). Why a room: none of it knows a request, a connection or a consumer group;
the handlers above call it.
"""
