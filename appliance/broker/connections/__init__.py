"""What one client address may cost the broker before it has done anything useful.

``cap`` (Kafka's ``max.connections.per.ip`` and ``max.connections``), ``rate`` (the
per-IP connection creation rate, KIP-612), ``request_pool`` (Kafka's
``queued.max.request.bytes``) and ``preauth_queue`` (requests of connections that have not
authenticated yet wait their turn, bounded per event-loop iteration). Why a room: each
bounds a hostile or broken client's cost at the server's door, before any handler runs.
"""
