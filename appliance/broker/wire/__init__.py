"""Kafka's wire format, as the broker and its tiny client speak it.

The primitives and schema types (``codec``), the message schema of every API and the
versions advertised (``schemas``), their compiled (de)serialisers (``codegen``), how big
a request of each API may be (``request_limits``), record batches (``records``: header,
CRC-32C, the bounded record walk) and their codecs (``compression``, capped), the
protocol's error codes (``errors``), and a small blocking client built on the same tables
(``client``). Why a room of its own: everything
above speaks in request and response dicts; only this room knows bytes, and it knows
nothing of topics, groups or connections.
"""
