"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka uses them: the server side
of the exchange, and the salted credentials it checks against.

Why SCRAM: the broker never stores or sees a password. The credentials file holds only
``StoredKey`` and ``ServerKey`` per user (derived from the password with PBKDF2 and a
random salt), and the client proves it knows the password without sending it. The client
also checks the server's signature, so a fake broker learns nothing either.

Kafka's flavour: no channel binding (``n,,`` GS2 header), an optional authorization id
that must equal the user, at least 4096 iterations, and optional ``key=value`` extensions
after the nonce (``tokenauth``), which this broker does not honour and refuses.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

MIN_ITERATIONS = 4096  # Kafka refuses fewer
DEFAULT_ITERATIONS = 8192


@dataclass(frozen=True)
class Mechanism:
    name: str
    hash_name: str

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def h(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)


SHA_256 = Mechanism("SCRAM-SHA-256", "sha256")
SHA_512 = Mechanism("SCRAM-SHA-512", "sha512")
MECHANISMS = {m.name: m for m in (SHA_256, SHA_512)}
_FAKE_SALT_KEY = secrets.token_bytes(32)  # per process: fake salts for unknown users


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps for one user and mechanism (never the password).

    ``repr`` shows no key material: credentials may end up in a log by accident.
    """

    salt: bytes = field(repr=False)
    iterations: int
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)

    @classmethod
    def derive(cls, mechanism: Mechanism, password: str, salt: bytes | None = None,
               iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
        if iterations < MIN_ITERATIONS:
            raise ValueError(f"iterations must be at least {MIN_ITERATIONS}")
        salt = salt if salt is not None else secrets.token_bytes(32)
        salted = mechanism.salted_password(password, salt, iterations)
        client_key = mechanism.hmac(salted, b"Client Key")
        return cls(salt=salt, iterations=iterations, stored_key=mechanism.h(client_key),
                   server_key=mechanism.hmac(salted, b"Server Key"))

    @classmethod
    def from_salted(cls, mechanism: Mechanism, salt: bytes, iterations: int,
                    salted_password: bytes) -> ScramCredential:
        """The credential of a salted password a client computed (Kafka's admin API,
        KIP-554: the password itself never reaches the broker)."""
        client_key = mechanism.hmac(salted_password, b"Client Key")
        return cls(salt=salt, iterations=iterations, stored_key=mechanism.h(client_key),
                   server_key=mechanism.hmac(salted_password, b"Server Key"))

    def verify_password(self, mechanism: Mechanism, password: str) -> bool:
        """For SASL/PLAIN: does ``password`` produce this credential? (constant-time)"""
        salted = mechanism.salted_password(password, self.salt, self.iterations)
        stored = mechanism.h(mechanism.hmac(salted, b"Client Key"))
        return hmac.compare_digest(stored, self.stored_key)

    def to_dict(self) -> dict:
        b64 = base64.b64encode
        return {"salt": b64(self.salt).decode(), "iterations": self.iterations,
                "stored_key": b64(self.stored_key).decode(),
                "server_key": b64(self.server_key).decode()}


def password_matches(mechanism: str, password: str,
                     credential: ScramCredential | None) -> bool:
    """SASL/PLAIN: does ``password`` produce ``credential``? For an unknown user (None)
    the same work is done, then False: timing does not tell which users exist.

    Runs in the broker's password worker processes: arguments and result are picklable.
    """
    mech = MECHANISMS[mechanism]
    if credential is None:
        mech.salted_password(password, bytes(32), DEFAULT_ITERATIONS)
        return False
    return credential.verify_password(mech, password)


class ScramError(Exception):
    """The exchange failed; the message is safe to send to the client and to log (it
    never contains a password, proof or key)."""


def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"malformed SCRAM {what} message")
        out.append((key, value))
    return out


def _saslname(value: str) -> str:
    """RFC 5802 escaping: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other ``=`` is invalid."""
    out, i = [], 0
    while i < len(value):
        if value[i] == "=":
            code = value[i:i + 3]
            if code == "=2C":
                out.append(",")
            elif code == "=3D":
                out.append("=")
            else:
                raise ScramError("malformed SCRAM user name")
            i += 3
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


class ScramServer:
    """One server-side SCRAM exchange: ``first(client_first) -> server_first``, then
    ``final(client_final) -> server_final``; ``user`` is set once ``final`` succeeded.

    ``lookup(user)`` returns the user's credential or None. An unknown user gets a made-up
    salt and fails at the final step exactly like a wrong password, so the exchange does
    not reveal which users exist.
    """

    def __init__(self, mechanism: Mechanism, lookup) -> None:
        self.mechanism = mechanism
        self.lookup = lookup
        self.user: str | None = None
        self._claimed: str | None = None
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._client_nonce = ""
        self._gs2 = ""

    def first(self, data: bytes) -> bytes:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("SCRAM message is not UTF-8") from None
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            raise ScramError("unsupported SCRAM GS2 header (channel binding is not offered)")
        authzid = parts[1]
        self._gs2 = f"{parts[0]},{authzid},"
        self._client_first_bare = parts[2]
        attrs = _attributes(parts[2], "client-first")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise ScramError("malformed SCRAM client-first message")
        if len(attrs) > 2:
            raise ScramError("SCRAM extensions (delegation tokens) are not supported")
        user = _saslname(attrs[0][1])
        if authzid and (not authzid.startswith("a=") or _saslname(authzid[2:]) != user):
            raise ScramError("SCRAM authorization id must equal the user name")
        self._claimed = user
        credential = self.lookup(user)
        self._credential = credential
        # An unknown user sees a salt that is stable per name (a fresh one per attempt
        # would tell it apart from a real user) and fails at the final step.
        shown = credential or ScramCredential(
            salt=hmac.new(_FAKE_SALT_KEY, user.encode(), "sha256").digest(),
            iterations=DEFAULT_ITERATIONS, stored_key=b"", server_key=b"")
        self._client_nonce = attrs[1][1]
        self._nonce = self._client_nonce + secrets.token_urlsafe(24)
        self._server_first = (f"r={self._nonce},s={base64.b64encode(shown.salt).decode()},"
                              f"i={shown.iterations}")
        return self._server_first.encode()

    def final(self, data: bytes) -> bytes:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("SCRAM message is not UTF-8") from None
        attrs = _attributes(text, "client-final")
        if len(attrs) < 3 or attrs[0][0] != "c" or attrs[1][0] != "r" or attrs[-1][0] != "p":
            raise ScramError("malformed SCRAM client-final message")
        try:
            binding = base64.b64decode(attrs[0][1], validate=True)
            proof = base64.b64decode(attrs[-1][1], validate=True)
        except ValueError:
            raise ScramError("malformed SCRAM client-final message") from None
        if binding != self._gs2.encode():
            raise ScramError("SCRAM channel binding does not match")
        if attrs[1][1] not in (self._nonce, self._client_nonce + self._nonce):
            # RFC 5802 wants the server's nonce back. librdkafka before 2.6.1 (Debian 12's,
            # under its kcat) sends its own nonce in front of it once more; Kafka 3.8.1-3.9
            # accept that too. Either way the server's random part must come back whole.
            raise ScramError("SCRAM nonce does not match")
        without_proof = text[:text.rindex(",p=")]
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 without_proof)).encode()
        cred = self._credential
        m = self.mechanism
        if cred is None or len(proof) != m.digest_size:
            raise ScramError("invalid credentials")
        signature = m.hmac(cred.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(m.h(client_key), cred.stored_key):
            raise ScramError("invalid credentials")
        self.user = self._claimed
        server_signature = m.hmac(cred.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
