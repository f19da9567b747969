"""Consumer groups: membership, assignment, committed offsets, in both of Kafka's protocols.

The wire handlers (``apis``) turn requests into calls on the classic protocol's state
machine (``coordinator``, which reads the subscription inside JoinGroup:
``consumer_protocol``) or on KIP-848's (``consumer_groups``, which computes assignments
with ``assignors``), and keep each group's committed offsets (``offsets``, durable with
``--data-dir``). Why a room: downstream consumers written with ``group.id`` need all of
it, and nothing else in the broker needs any of it but the dispatch table and the metrics.
"""
