"""One request frame to its handler, and the handler's answer to the response queue.

A frame's header (api key, version, correlation id, client id) is read and checked: an
API this broker does not serve, a version out of its range (ApiVersions excepted: it is
answered in v0, so a client can read the ranges and retry), a malformed request, a request
before SASL authentication other than the exchange itself: each closes the connection,
naming why (``broker.connection_closed``). A SASL request goes to the connection's
``AuthSteps``; any other to the broker's handler for its API, with the ``Caller`` it came
from. The answer (a body, a Future of one, or nothing for an acks=0 produce) is queued in
request order (``responses``).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from appliance.broker.caller import Caller
from appliance.broker.connections.auth_steps import AuthSteps
from appliance.broker.connections.responses import ResponseQueue
from appliance.broker.security import sasl
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.codec import DecodeError, Reader
from appliance.broker.wire.codegen import decode_struct
from appliance.logs import get_logger

log = get_logger("appliance.broker")
HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id

Handler = Callable[[int, dict, Caller], Any]


class RequestTimer(Protocol):
    def request_done(self, api_key: int, started: float, result: Any) -> None:
        """Count a handled request and its time since ``started`` (perf_counter)."""


class Closing(Protocol):
    def close(self, reason: str, **fields: Any) -> None:
        """Close the connection, logging why."""

    def request_done(self) -> None:
        """A request is done without a response (acks=0): read the next."""


class RequestDispatch:
    def __init__(self, handlers: Mapping[int, Handler], api_versions: Callable[[], list],
                 max_items: int, auth: AuthSteps, responses: ResponseQueue,
                 owner: Closing, metrics: RequestTimer | None = None) -> None:
        self.handlers = handlers
        self.api_versions = api_versions  # the ApiVersions answer's ranges
        self.max_items = max_items  # the most items one request's arrays may claim
        self.auth = auth
        self.responses = responses
        self.owner = owner
        self.metrics = metrics
        self.peer: object = None  # for the log lines
        # who sends on this connection: rebuilt only when the header's client id changes
        self.caller = Caller("", "")
        self._client_id_raw = b""

    def logged_in(self, user: str | None) -> None:
        # Kafka's principal for a SASL login: User:<name>; what ACLs name.
        self.caller = self.caller._replace(principal=f"User:{user}")

    def handle(self, frame: memoryview) -> None:
        if self.auth.expects_raw_token:
            # After SaslHandshake v0 the whole frame is the token; so is the answer.
            self.responses.respond(False, -1, None, 0, self.auth.step(
                schemas.SASL_AUTHENTICATE.key, 0, {"auth_bytes": bytes(frame)}))
            return
        if len(frame) < HEADER.size:
            self.owner.close("request shorter than a header", frame_size=len(frame))
            return
        api_key, version, corr = HEADER.unpack_from(frame)
        if not self.auth.admits(api_key):
            self.owner.close("request before authentication", api_key=api_key)
            return
        schema = schemas.BY_KEY.get(api_key)
        if schema is None:
            self.owner.close("unsupported api", api_key=api_key, api_version=version)
            return
        if not schema.min_version <= version <= schema.max_version:
            if api_key == schemas.API_VERSIONS.key:
                # Clients probe with their newest ApiVersions; answer in v0 so they can
                # read our ranges and retry with one we support.
                log.debug("broker.api_versions_fallback", requested=version, peer=str(self.peer))
                self.responses.respond(False, corr, schema, 0, {
                    "error_code": errors.UNSUPPORTED_VERSION,
                    "api_keys": self.api_versions()})
                return
            self.owner.close("unsupported api version", api=schema.name, api_version=version,
                             supported=f"{schema.min_version}-{schema.max_version}")
            return
        flexible = schema.flexible(version)
        r = Reader(frame, HEADER.size)
        try:
            n = r.int16()
            client_id = r.raw(n) if n > 0 else b""
            if flexible:
                r.skip_tagged()
            req = decode_struct(schema.request, r, version, flexible, schema.name + "Request",
                                self.max_items)
        except DecodeError as exc:
            self.owner.close("malformed request", api=schema.name, api_version=version,
                             error=str(exc))
            return
        metrics = self.metrics
        started = time.perf_counter() if metrics is not None else 0.0
        if api_key in sasl.SASL_API_KEYS:
            self.responses.respond(schemas.response_header_flexible(api_key, version), corr,
                                   schema, version, self.auth.step(api_key, version, req))
            return
        if client_id != self._client_id_raw:
            self._client_id_raw = bytes(client_id)
            self.caller = self.caller._replace(
                client_id=str(self._client_id_raw, "utf-8", "replace"))
        try:
            result = self.handlers[api_key](version, req, self.caller)
        except Exception as exc:
            log.exception("broker.handler_failed", api=schema.name, api_version=version)
            self.owner.close("handler failed", error=repr(exc))
            return
        if metrics is not None and result is not None:
            metrics.request_done(api_key, started, result)
        if result is None:
            self.owner.request_done()  # acks=0 produce: no response by protocol
            return
        self.responses.respond(schemas.response_header_flexible(api_key, version), corr,
                               schema, version, result)
