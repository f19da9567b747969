"""A login flood against the broker, and the SASL client side it (and its bystander) use.

``python -m bench._login_flood BOOTSTRAP --mechanism M --concurrency N --seconds S``, with
the password in ``LOGIN_FLOOD_PASSWORD`` (never in argv): N connections at once, each
logging in (SaslHandshake, SaslAuthenticate) and closing, again and again, from one
process and one source address; prints one JSON line of counts at the end.

The flood is as cheap for the client as it can be made, to put the most work on the
broker: a SCRAM client derives the salted password once (the broker's salt for a user
never changes) and then only computes HMACs per login.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import secrets
import struct
import sys
import time
from dataclasses import asdict, dataclass

from appliance.broker.security.scram import MECHANISMS, Mechanism
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.client import WireClient, decode_response, encode_request

PASSWORD_ENV = "LOGIN_FLOOD_PASSWORD"
_SIZE = struct.Struct(">i")


class LoginRefused(Exception):
    """The broker answered the exchange with an error."""


class ScramClient:
    """The client side of one SCRAM exchange (RFC 5802), as Kafka clients speak it."""

    def __init__(self, mechanism: Mechanism, user: str, password: str,
                 salted_cache: dict | None = None) -> None:
        self.mechanism, self.password = mechanism, password
        self.cache = salted_cache if salted_cache is not None else {}
        self.first_bare = f"n={user},r={secrets.token_urlsafe(18)}"
        self._server_signature = b""

    def first(self) -> bytes:
        return ("n,," + self.first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        m = self.mechanism
        attrs = dict(kv.split("=", 1) for kv in server_first.decode().split(","))
        nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        if not nonce.startswith(self.first_bare.rsplit("r=", 1)[1]):
            raise LoginRefused("server nonce does not extend ours")
        salted = self.cache.get((salt, iterations))
        if salted is None:
            salted = self.cache[(salt, iterations)] = m.salted_password(self.password, salt,
                                                                        iterations)
        client_key = m.hmac(salted, b"Client Key")
        without_proof = f"c=biws,r={nonce}"  # biws: base64 of the GS2 header "n,,"
        auth = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        proof = bytes(a ^ b for a, b in zip(client_key, m.hmac(m.h(client_key), auth),
                                            strict=True))
        self._server_signature = m.hmac(m.hmac(salted, b"Server Key"), auth)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def check_server(self, server_final: bytes) -> None:
        if server_final != b"v=" + base64.b64encode(self._server_signature):
            raise LoginRefused("the server's SCRAM signature is wrong")


def _tokens(mechanism: str, user: str, password: str, cache: dict):
    """The SaslAuthenticate tokens of one login: a generator fed the server's answers."""
    if mechanism == "PLAIN":
        yield f"\0{user}\0{password}".encode()
        return
    scram = ScramClient(MECHANISMS[mechanism], user, password, cache)
    server_first = yield scram.first()
    server_final = yield scram.final(server_first)
    scram.check_server(server_final)


def _checked(resp: dict, what: str) -> dict:
    if resp["error_code"] != errors.NONE:
        raise LoginRefused(f"{what}: error {resp['error_code']} "
                           f"{resp.get('error_message') or ''}".strip())
    return resp


def login(client: WireClient, mechanism: str, user: str, password: str,
          cache: dict | None = None) -> None:
    """Authenticate a blocking WireClient connection (raises LoginRefused)."""
    _checked(client.request(schemas.SASL_HANDSHAKE, 1, {"mechanism": mechanism}),
             "SaslHandshake")
    steps = _tokens(mechanism, user, password, cache if cache is not None else {})
    token = next(steps)
    while True:
        resp = _checked(client.request(schemas.SASL_AUTHENTICATE, 2, {"auth_bytes": token}),
                        "SaslAuthenticate")
        try:
            token = steps.send(bytes(resp["auth_bytes"]))
        except StopIteration:
            return


@dataclass
class FloodCounts:
    logins: int = 0  # completed, accepted by the broker
    refused: int = 0  # closed by the broker before or during the exchange
    failed: int = 0  # answered with an error
    seconds: float = 0.0


async def _request(reader, writer, schema, version: int, body: dict, corr: int) -> dict:
    writer.write(encode_request(schema, version, body, corr, "login-flood"))
    size = _SIZE.unpack(await reader.readexactly(4))[0]
    return decode_response(schema, version, await reader.readexactly(size))[1]


async def _one_login(host: str, port: int, source_ip: str, mechanism: str, user: str,
                     password: str, cache: dict) -> None:
    reader, writer = await asyncio.open_connection(host, port, local_addr=(source_ip, 0))
    try:
        _checked(await _request(reader, writer, schemas.SASL_HANDSHAKE, 1,
                                {"mechanism": mechanism}, 1), "SaslHandshake")
        steps = _tokens(mechanism, user, password, cache)
        token, corr = next(steps), 2
        while True:
            resp = _checked(await _request(reader, writer, schemas.SASL_AUTHENTICATE, 2,
                                           {"auth_bytes": token}, corr), "SaslAuthenticate")
            corr += 1
            try:
                token = steps.send(bytes(resp["auth_bytes"]))
            except StopIteration:
                return
    finally:
        writer.close()


async def flood(bootstrap: str, mechanism: str, user: str, password: str, concurrency: int,
                seconds: float, source_ip: str) -> FloodCounts:
    host, _, port = bootstrap.rpartition(":")
    counts = FloodCounts()
    cache: dict = {}
    # one login first, alone: it derives the salted password the others then reuse
    await _one_login(host, int(port), source_ip, mechanism, user, password, cache)
    deadline = time.monotonic() + seconds
    started = time.monotonic()

    async def worker() -> None:
        while time.monotonic() < deadline:
            try:
                await _one_login(host, int(port), source_ip, mechanism, user, password, cache)
                counts.logins += 1
            except LoginRefused:
                counts.failed += 1
            except (OSError, asyncio.IncompleteReadError):
                counts.refused += 1
                await asyncio.sleep(0.001)  # a client would back off a little, too

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    counts.seconds = round(time.monotonic() - started, 2)
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench._login_flood", description=__doc__)
    ap.add_argument("bootstrap")
    ap.add_argument("--mechanism", default="SCRAM-SHA-512",
                    choices=["PLAIN", *MECHANISMS])
    ap.add_argument("--user", required=True)
    ap.add_argument("--concurrency", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--source-ip", default="127.0.0.2",
                    help="connect from this address (another loopback address than the "
                         "bystander's, so the per-IP cap tells them apart)")
    args = ap.parse_args(argv)
    password = os.environ.get(PASSWORD_ENV)
    if not password:
        print(f"bench._login_flood: set {PASSWORD_ENV}", file=sys.stderr)
        return 2
    counts = asyncio.run(flood(args.bootstrap, args.mechanism, args.user, password,
                               args.concurrency, args.seconds, args.source_ip))
    print(json.dumps(asdict(counts)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
