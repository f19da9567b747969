"""SASL authentication of one connection: SaslHandshake v1 + SaslAuthenticate, as Kafka
brokers do it, with PLAIN and SCRAM-SHA-256/512; and SaslHandshake v0, after which the
tokens travel as bare size-prefixed frames (``raw_tokens``), as Kafka 0.10 did.

Why v0 at all: librdkafka before 2.1 (Debian 12's, under its kcat) will not start any
SASL mechanism but GSSAPI unless the broker's ApiVersions lists SaslHandshake v0, even
though it then uses v1 with SaslAuthenticate; Kafka lists 0-1.

Why a gate in front of the handlers: until a connection has authenticated, the only
requests it may send are ApiVersions (clients ask before they authenticate), SaslHandshake
and SaslAuthenticate; anything else closes the connection before its body is even decoded,
and frames are capped at ``UNAUTHENTICATED_MAX_FRAME`` (Kafka's own limit for the same
reason), so a stranger cannot make the broker buffer or parse much.

Failures answer with the codes real clients turn into clear exceptions - Java
``SaslAuthenticationException``, librdkafka ``_AUTHENTICATION``, kafka-python
``SaslAuthenticationFailedError`` - and never echo a user's password, proof or token:
  - a mechanism the listener does not enable: UNSUPPORTED_SASL_MECHANISM and the list;
  - SaslAuthenticate before a handshake, or a second handshake: ILLEGAL_SASL_STATE;
  - wrong user or password: SASL_AUTHENTICATION_FAILED, then the connection closes.
Each failure closes after ``failed_auth_close_delay_ms`` (the server's job), as Kafka does.

Checking a PLAIN password derives the user's SCRAM key with PBKDF2: thousands of hash
rounds, milliseconds of CPU. That work is handed back as a ``PasswordCheck`` for the server
to run in a worker process (``password_pool``), never on the event loop every client
shares. (The SCRAM exchanges need no PBKDF2 on the server: the stored key is checked with
two HMACs.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from functools import partial
from typing import NamedTuple

from appliance.broker.security.credentials import Users
from appliance.broker.security.scram import MECHANISMS, ScramError, ScramServer, password_matches
from appliance.broker.wire import errors, schemas

PLAIN = "PLAIN"
ALL_MECHANISMS = (PLAIN, *MECHANISMS)
UNAUTHENTICATED_MAX_FRAME = 524_288  # Kafka's sasl.server.max.receive.size
PRE_AUTH_APIS = frozenset({schemas.API_VERSIONS.key, schemas.SASL_HANDSHAKE.key,
                           schemas.SASL_AUTHENTICATE.key})
SASL_API_KEYS = frozenset({schemas.SASL_HANDSHAKE.key, schemas.SASL_AUTHENTICATE.key})
FAILED = "Authentication failed: invalid username or password"


class State(Enum):
    HANDSHAKE = "handshake"  # waiting for SaslHandshake
    AUTHENTICATE = "authenticate"  # mechanism chosen, exchanging tokens
    CHECKING = "checking"  # a PLAIN password is being checked off the event loop
    DONE = "done"  # authenticated: every API is open
    FAILED = "failed"  # answered with an error; the connection is closing


_OUT_OF_ORDER = {State.HANDSHAKE: "SaslAuthenticate before SaslHandshake",
                 State.CHECKING: "SaslAuthenticate while the previous one is being checked",
                 State.DONE: "already authenticated",
                 State.FAILED: "authentication already failed"}


@dataclass(frozen=True)
class SaslSettings:
    """A listener's SASL: which mechanisms it offers and who may log in."""

    mechanisms: tuple[str, ...]
    users: Users


class PasswordCheck(NamedTuple):
    """A PLAIN password to check off the event loop: call ``run`` in a worker process (a
    picklable call of ``scram.password_matches``), then hand its result to ``finish`` on
    the loop, which returns the SaslAuthenticate response."""

    run: partial[bool]
    finish: Callable[[bool], dict]


def not_on_this_listener(api_key: int) -> dict:
    """SaslHandshake/SaslAuthenticate where no SASL is expected (plain or SSL listener,
    or an already authenticated connection)."""
    if api_key == schemas.SASL_HANDSHAKE.key:
        return {"error_code": errors.ILLEGAL_SASL_STATE, "mechanisms": []}
    return {"error_code": errors.ILLEGAL_SASL_STATE, "auth_bytes": b"",
            "error_message": "no SASL authentication is expected on this connection",
            "session_lifetime_ms": 0}


def _plain_claim(users: Users, token: bytes) -> tuple[str, partial[bool]] | None:
    """RFC 4616 ``authzid NUL authcid NUL passwd``: the user and the check of the password
    (to run off the loop), or None if the token is malformed."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        return None
    try:
        authzid, user, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        return None
    if not user or (authzid and authzid != user):
        return None
    # Checked against a SCRAM credential: the file holds no passwords. Any of the user's
    # credentials will do; SHA-512 first (stronger, and it is what `add_user` writes). An
    # unknown user costs the same check (None), so timing does not tell who exists.
    for name in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
        cred = users.lookup(name, user)
        if cred is not None:
            return user, partial(password_matches, name, password, cred)
    return user, partial(password_matches, "SCRAM-SHA-512", password, None)


class SaslSession:
    """The SASL state of one connection on a SASL listener."""

    def __init__(self, settings: SaslSettings) -> None:
        self.settings = settings
        self.state = State.HANDSHAKE
        self.mechanism: str | None = None
        self.user: str | None = None
        self._scram: ScramServer | None = None
        self._scram_step = 0
        self.failure: str | None = None  # why it failed, safe to log
        self.raw_tokens = False  # SaslHandshake v0: tokens arrive as bare frames

    @property
    def authenticated(self) -> bool:
        return self.state is State.DONE

    def handle(self, api_key: int, version: int, req: dict) -> dict | PasswordCheck:
        if api_key == schemas.SASL_HANDSHAKE.key:
            answer = self._handshake(req)
            self.raw_tokens = version == 0 and self.state is State.AUTHENTICATE
            return answer
        return self._authenticate(req)

    @property
    def expects_raw_token(self) -> bool:
        """The next frame is a bare token (after a v0 handshake), not a Kafka request."""
        return self.raw_tokens and self.state is State.AUTHENTICATE

    def _handshake(self, req: dict) -> dict:
        offered = list(self.settings.mechanisms)
        if self.state is not State.HANDSHAKE:
            return self._fail({"error_code": errors.ILLEGAL_SASL_STATE, "mechanisms": offered},
                              "SaslHandshake after the handshake")
        mechanism = req["mechanism"]
        if mechanism not in offered:
            # Kafka closes after this answer too; the client names the mechanisms it saw.
            return self._fail({"error_code": errors.UNSUPPORTED_SASL_MECHANISM,
                               "mechanisms": offered}, "mechanism not enabled",
                              mechanism=mechanism)
        self.mechanism = mechanism
        self.state = State.AUTHENTICATE
        return {"error_code": errors.NONE, "mechanisms": offered}

    def _auth_response(self, token: bytes = b"") -> dict:
        return {"error_code": errors.NONE, "error_message": None, "auth_bytes": token,
                "session_lifetime_ms": 0}

    def _authenticate(self, req: dict) -> dict | PasswordCheck:
        if self.state is not State.AUTHENTICATE:
            return self._fail({"error_code": errors.ILLEGAL_SASL_STATE,
                               "error_message": _OUT_OF_ORDER[self.state],
                               "auth_bytes": b"", "session_lifetime_ms": 0},
                              "SaslAuthenticate out of order")
        token = bytes(req["auth_bytes"])
        if self.mechanism == PLAIN:
            claim = _plain_claim(self.settings.users, token)
            if claim is None:
                return self._denied("malformed PLAIN token")
            user, check = claim
            self.state = State.CHECKING
            return PasswordCheck(check, partial(self._plain_checked, user))
        if self._scram is None:
            assert self.mechanism is not None  # State.AUTHENTICATE: the handshake chose it
            mech = MECHANISMS[self.mechanism]
            self._scram = ScramServer(
                mech, lambda name: self.settings.users.lookup(mech.name, name))
        try:
            if self._scram_step == 0:
                self._scram_step = 1
                return self._auth_response(self._scram.first(token))
            final = self._scram.final(token)
        except ScramError as exc:
            return self._denied(str(exc))
        return self._done(self._scram.user, final)

    def _plain_checked(self, user: str, matches: bool) -> dict:
        if self.state is not State.CHECKING:  # refused meanwhile (a pipelined request)
            return self._denied("connection failed during the password check")
        if not matches:
            return self._denied("invalid credentials")
        return self._done(user, b"")

    def _done(self, user: str | None, token: bytes) -> dict:
        self.user = user
        self.state = State.DONE
        return self._auth_response(token)

    def _denied(self, why: str) -> dict:
        return self._fail({"error_code": errors.SASL_AUTHENTICATION_FAILED,
                           "error_message": f"{FAILED} (SASL mechanism {self.mechanism})",
                           "auth_bytes": b"", "session_lifetime_ms": 0}, why)

    def _fail(self, response: dict, why: str, **fields) -> dict:
        self.state = State.FAILED
        self.failure = why if not fields else f"{why}: " + ", ".join(
            f"{k}={v}" for k, v in fields.items())
        return response
