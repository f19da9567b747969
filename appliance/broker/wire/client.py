"""A tiny blocking Kafka-protocol client built on the broker's own schemas.

Used by ``EmbeddedBroker.create_topics`` and by tests that need exact control of the
bytes on the wire (replayed produce requests, precise fetch waits). Not a general client.
"""

from __future__ import annotations

import socket
import struct

from appliance.broker.wire import errors, schemas
from appliance.broker.wire.codec import Reader, Writer
from appliance.broker.wire.codegen import decode_struct, encode_struct

_SIZE = struct.Struct(">i")


def encode_request(schema, version: int, body: dict, correlation_id: int,
                   client_id: str = "wire-client") -> bytes:
    """A complete request frame (size prefix included)."""
    flexible = schema.flexible(version)
    w = Writer()
    w.int16(schema.key)
    w.int16(version)
    w.int32(correlation_id)
    cid = client_id.encode()
    w.int16(len(cid))
    w.raw(cid)
    if flexible:
        w.uvarint(0)
    encode_struct(schema.request, w, version, flexible, body, schema.name + "Request")
    payload = w.getvalue()
    return _SIZE.pack(len(payload)) + payload


def decode_response(schema, version: int, frame: bytes) -> tuple[int, dict]:
    """(correlation id, body) of a response frame without its size prefix."""
    r = Reader(frame)
    corr = r.int32()
    if schemas.response_header_flexible(schema.key, version):
        r.skip_tagged()
    return corr, decode_struct(schema.response, r, version, schema.flexible(version),
                               schema.name + "Response")


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str = "wire-client",
                 source_ip: str | None = None):
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection(
            (host, int(port)), timeout=timeout,
            source_address=(source_ip, 0) if source_ip is not None else None)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self._corr = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def encode(self, schema, version: int, body: dict, correlation_id: int | None = None
               ) -> bytes:
        """A complete request frame (size prefix included)."""
        if correlation_id is None:
            self._corr += 1
            correlation_id = self._corr
        return encode_request(schema, version, body, correlation_id, self.client_id)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        size = _SIZE.unpack(self._recv_exact(4))[0]
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            chunk = self.sock.recv(n - got)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def decode_response(self, schema, version: int, frame: bytes) -> tuple[int, dict]:
        return decode_response(schema, version, frame)

    def request(self, schema, version: int, body: dict) -> dict:
        frame = self.encode(schema, version, body)
        self.send_raw(frame)
        if schema.key == schemas.PRODUCE.key and body.get("acks") == 0:
            return {}
        corr, resp = self.decode_response(schema, version, self.recv_frame())
        if corr != self._corr:
            raise ConnectionError(f"correlation id {corr} != {self._corr}")
        return resp


def create_topics(bootstrap: str, topics: dict[str, int], configs: dict | None = None,
                  ignore_existing: bool = True) -> dict[str, int]:
    """Create topics over the protocol; returns error codes by name (0 = created)."""
    body = {"topics": [{"name": name, "num_partitions": n, "replication_factor": 1,
                        "assignments": [],
                        "configs": [{"name": k, "value": str(v)}
                                    for k, v in (configs or {}).items()]}
                       for name, n in topics.items()],
            "timeout_ms": 10000, "validate_only": False}
    with WireClient(bootstrap) as c:
        resp = c.request(schemas.CREATE_TOPICS, 4, body)
    codes = {t["name"]: t["error_code"] for t in resp["topics"]}
    tolerated = {errors.TOPIC_ALREADY_EXISTS} if ignore_existing else set()
    bad = {n: c for n, c in codes.items() if c and c not in tolerated}
    if bad:
        msgs = {t["name"]: t["error_message"] for t in resp["topics"] if t["name"] in bad}
        raise RuntimeError(f"create_topics failed: {msgs} (codes {bad})")
    return codes
