"""Consumer groups (the classic protocol): membership, rebalances, committed offsets.

The wire handlers (``apis``) turn requests into calls on the state machine
(``coordinator``), which reads the subscription inside JoinGroup (``consumer_protocol``)
and keeps each group's committed offsets (``offsets``, durable with ``--data-dir``). Why
a room: downstream consumers written with ``group.id`` need all of it, and nothing
else in the broker needs any of it but the dispatch table and the metrics.
"""
