"""A client connection's pieces, and what one client address may cost the broker before
it has done anything useful.

One connection (``server.Connection`` wires them to asyncio): ``framing`` (request frames
out of the byte stream, their size caps, request-pool bytes for large ones), ``read_gate``
(why reading is paused), ``auth_steps`` (the SASL exchange and its timeout), ``dispatch``
(a frame's header checked, then to its handler) and ``responses`` (answers in request
order, written whole or streamed). Each works without a socket, and is tested so.

What one address may cost: ``cap`` (Kafka's ``max.connections.per.ip`` and
``max.connections``), ``rate`` (the per-IP connection creation rate, KIP-612),
``request_pool`` (Kafka's ``queued.max.request.bytes``) and ``preauth_queue`` (requests of
connections that have not authenticated yet wait their turn, bounded per event-loop
iteration). Why one room: each bounds a hostile or broken client's cost at the server's
door, before any handler runs, and the connection's pieces are where those bounds apply.
"""
