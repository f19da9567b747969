"""SASL on the wire, with raw requests: the gate before authentication, the handshake and
authenticate state machine, Kafka's error codes, and SCRAM against RFC 7677's example.

A SASL_PLAINTEXT listener (PLAIN explicitly enabled) keeps the bytes inspectable; TLS and
real clients are covered in test_auth_clients.py.
"""

from __future__ import annotations

import base64
import hmac
import os
import struct
import subprocess
import sys
import time

import pytest

from appliance.broker import EmbeddedBroker
from appliance.broker.security import scram
from appliance.broker.security.credentials import CredentialsError, add_user, load_users
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.client import WireClient

from support.secure_helpers import USER, broker_args, make_users, new_password
from support.wire_helpers import metadata

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("sasl-plaintext")
    password = new_password()
    users = make_users(d / "users.toml", password)
    b = EmbeddedBroker(extra_args=broker_args("SASL_PLAINTEXT", users=users,
                                              mechanisms="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")
                       + ["--topics", "secured:1"], log_path=d / "broker.log")
    b.start()
    b.password = password
    yield b
    b.stop()


def _handshake(c: WireClient, mechanism: str) -> dict:
    return c.request(schemas.SASL_HANDSHAKE, 1, {"mechanism": mechanism})


def _authenticate(c: WireClient, token: bytes, version: int = 2) -> dict:
    return c.request(schemas.SASL_AUTHENTICATE, version, {"auth_bytes": token})


def _closed(c: WireClient) -> bool:
    c.sock.settimeout(10)
    try:
        return c.sock.recv(1) == b""
    except ConnectionError:
        return True


def test_api_versions_advertise_the_sasl_apis(broker):
    with WireClient(broker.bootstrap) as c:
        resp = c.request(schemas.API_VERSIONS, 3, {"client_software_name": "t",
                                                   "client_software_version": "1"})
    keys = {a["api_key"]: (a["min_version"], a["max_version"]) for a in resp["api_keys"]}
    assert keys[17] == (0, 1)  # SaslHandshake: v1 (tokens in SaslAuthenticate), v0 (bare)
    assert keys[36] == (0, 2)  # SaslAuthenticate, v2 flexible


def test_sasl_on_a_plaintext_listener_is_an_illegal_state(broker):
    with WireClient(broker.bootstrap) as c:
        assert _handshake(c, "PLAIN")["error_code"] == errors.ILLEGAL_SASL_STATE
    with WireClient(broker.bootstrap) as c:
        assert _authenticate(c, b"\0a\0b")["error_code"] == errors.ILLEGAL_SASL_STATE


def test_requests_before_authentication_close_the_connection(sasl_broker):
    with WireClient(sasl_broker.bootstrap) as c:
        # ApiVersions is allowed before authenticating (clients ask first)
        resp = c.request(schemas.API_VERSIONS, 3, {"client_software_name": "t",
                                                   "client_software_version": "1"})
        assert resp["error_code"] == 0
        c.send_raw(c.encode(schemas.METADATA, 9, {"topics": None,
                                                 "allow_auto_topic_creation": False}))
        assert _closed(c)
    with WireClient(sasl_broker.bootstrap) as c:
        _handshake(c, "PLAIN")  # chosen but not yet authenticated: still closed
        c.send_raw(c.encode(schemas.METADATA, 9, {"topics": None,
                                                 "allow_auto_topic_creation": False}))
        assert _closed(c)


def test_oversized_frame_before_authentication_is_refused(sasl_broker):
    with WireClient(sasl_broker.bootstrap) as c:
        c.send_raw((1 << 20).to_bytes(4, "big") + b"\0" * 64)  # 1 MiB claimed, > 512 KiB
        assert _closed(c)


def test_unsupported_mechanism_lists_the_enabled_ones(sasl_broker):
    with WireClient(sasl_broker.bootstrap) as c:
        resp = _handshake(c, "GSSAPI")
        assert resp["error_code"] == errors.UNSUPPORTED_SASL_MECHANISM
        assert resp["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert _closed(c)


def test_authenticate_before_handshake_is_an_illegal_state(sasl_broker):
    with WireClient(sasl_broker.bootstrap) as c:
        resp = _authenticate(c, b"\0" + USER.encode() + b"\0" + sasl_broker.password.encode())
        assert resp["error_code"] == errors.ILLEGAL_SASL_STATE
        assert _closed(c)


def test_a_refused_client_reads_its_answer_before_the_close(tmp_path):
    """Kafka's connection.failed.authentication.delay.ms: after a failed authentication
    the broker reads nothing more and closes only after the delay, so the client has read
    the error first (kafka-python discards bytes that arrive together with the close)."""
    password = new_password()
    users = make_users(tmp_path / "users.toml", password)
    b = EmbeddedBroker(extra_args=broker_args("SASL_PLAINTEXT", users=users, mechanisms="PLAIN")
                       + ["--failed-auth-close-delay-ms", "3000"],
                       log_path=tmp_path / "broker.log")
    b.start()
    try:
        with WireClient(b.bootstrap) as c:
            _handshake(c, "PLAIN")
            resp = _authenticate(c, f"\0{USER}\0not-{password}".encode())
            assert resp["error_code"] == errors.SASL_AUTHENTICATION_FAILED
            answered = time.monotonic()
            c.send_raw(c.encode(schemas.METADATA, 9, {"topics": None,
                                                      "allow_auto_topic_creation": False}))
            c.sock.settimeout(0.5)
            with pytest.raises(TimeoutError):  # still open, and the request is ignored
                c.sock.recv(1)
            assert _closed(c)
            assert time.monotonic() - answered >= 2.5
    finally:
        b.stop()


@pytest.mark.parametrize("version", [0, 1, 2])
def test_plain_wrong_password_fails_without_echoing_it(sasl_broker, version):
    wrong = "not-" + sasl_broker.password
    with WireClient(sasl_broker.bootstrap) as c:
        assert _handshake(c, "PLAIN")["error_code"] == 0
        resp = _authenticate(c, f"\0{USER}\0{wrong}".encode(), version)
        assert resp["error_code"] == errors.SASL_AUTHENTICATION_FAILED
        assert wrong not in (resp["error_message"] or "")
        assert _closed(c)
    with WireClient(sasl_broker.bootstrap) as c:  # unknown user: the same answer
        _handshake(c, "PLAIN")
        resp = _authenticate(c, f"\0nobody\0{sasl_broker.password}".encode(), version)
        assert resp["error_code"] == errors.SASL_AUTHENTICATION_FAILED


def test_plain_right_password_opens_every_api_and_a_second_handshake_is_refused(sasl_broker):
    with WireClient(sasl_broker.bootstrap) as c:
        assert _handshake(c, "PLAIN")["error_code"] == 0
        resp = _authenticate(c, f"\0{USER}\0{sasl_broker.password}".encode())
        assert resp["error_code"] == 0 and resp["session_lifetime_ms"] == 0
        assert "secured" in {t["name"] for t in metadata(c)["topics"]}
        assert _handshake(c, "PLAIN")["error_code"] == errors.ILLEGAL_SASL_STATE


def _scram_client(c: WireClient, mech: scram.Mechanism, user: str, password: str):
    """A minimal SCRAM client (RFC 5802 client side) over SaslAuthenticate."""
    assert _handshake(c, mech.name)["error_code"] == 0
    nonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = f"n={user},r={nonce}"
    resp = _authenticate(c, ("n,," + first_bare).encode())
    assert resp["error_code"] == 0
    server_first = bytes(resp["auth_bytes"]).decode()
    attrs = dict(p.split("=", 1) for p in server_first.split(","))
    assert attrs["r"].startswith(nonce) and int(attrs["i"]) >= 4096
    salted = mech.salted_password(password, base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = mech.hmac(salted, b"Client Key")
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = mech.hmac(mech.h(client_key), auth_message)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}"
    resp = _authenticate(c, final.encode())
    server_key = mech.hmac(salted, b"Server Key")
    return resp, base64.b64encode(mech.hmac(server_key, auth_message)).decode()


@pytest.mark.parametrize("mech", [scram.SHA_256, scram.SHA_512], ids=lambda m: m.name)
def test_scram_exchange_proves_both_sides(sasl_broker, mech):
    with WireClient(sasl_broker.bootstrap) as c:
        resp, expected_signature = _scram_client(c, mech, USER, sasl_broker.password)
        assert resp["error_code"] == 0
        assert bytes(resp["auth_bytes"]).decode() == f"v={expected_signature}"  # server knew keys
        assert metadata(c)["topics"]
    with WireClient(sasl_broker.bootstrap) as c:
        resp, _ = _scram_client(c, mech, USER, "wrong-password")
        assert resp["error_code"] == errors.SASL_AUTHENTICATION_FAILED
        assert _closed(c)


def test_scram_matches_rfc_7677_example(monkeypatch):
    """RFC 7677 section 3: user "user", password "pencil"; the server's nonce is fixed."""
    cred = scram.ScramCredential.derive(scram.SHA_256, "pencil",
                                        base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096)
    monkeypatch.setattr(scram.secrets, "token_urlsafe", lambda n: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    server = scram.ScramServer(scram.SHA_256, lambda u: cred if u == "user" else None)
    first = server.first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.final(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                         b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.user == "user"


def test_unknown_scram_user_sees_a_stable_salt_and_fails_at_the_end():
    lookup = {}.get
    a = scram.ScramServer(scram.SHA_512, lookup).first(b"n,,n=ghost,r=abc")
    b = scram.ScramServer(scram.SHA_512, lookup).first(b"n,,n=ghost,r=abc")
    salt = [p for p in a.decode().split(",") if p.startswith("s=")]
    assert salt and salt == [p for p in b.decode().split(",") if p.startswith("s=")]


def test_users_file_holds_no_password_and_is_private(tmp_path):
    path = tmp_path / "users.toml"
    password = new_password()
    add_user(path, "alice", password)
    text = path.read_text()
    assert password not in text and "SCRAM-SHA-512" in text
    assert os.stat(path).st_mode & 0o777 == 0o600
    users = load_users(path)
    cred = users.lookup("SCRAM-SHA-256", "alice")
    assert cred.verify_password(scram.SHA_256, password)
    assert not cred.verify_password(scram.SHA_256, password + "x")
    assert "stored_key" not in repr(cred) and repr(cred.salt) not in repr(cred)


def test_users_file_readable_by_others_is_refused(tmp_path):
    path = tmp_path / "users.toml"
    add_user(path, "alice", new_password())
    os.chmod(path, 0o644)
    with pytest.raises(CredentialsError, match="chmod 600"):
        load_users(path)


@pytest.mark.parametrize("body, problem", [
    ('[users.a.SCRAM-SHA-256]\nsalt = "!!"\niterations = 4096\nstored_key = ""\n'
     'server_key = ""\n', "users.a.SCRAM-SHA-256.salt: not valid base64"),
    ('[users.a.SCRAM-SHA-256]\nsalt = ""\niterations = 10\nstored_key = ""\n'
     'server_key = ""\n', "iterations: must be an integer >= 4096"),
    ('[users.a]\nmd5 = "x"\n', "users.a.md5: unknown key"),
    ('[other]\n', "other: unknown key"),
])
def test_bad_users_file_names_the_entry(tmp_path, body, problem):
    path = tmp_path / "users.toml"
    path.write_text(body)
    os.chmod(path, 0o600)
    with pytest.raises(CredentialsError, match=problem.replace(".", r"\.")):
        load_users(path)


def test_broker_refuses_a_readable_users_file_with_exit_2(tmp_path):
    users = make_users(tmp_path / "users.toml", new_password())
    os.chmod(users, 0o640)
    proc = subprocess.run([sys.executable, "-m", "appliance", "broker", "--port", "0",
                           *broker_args("SASL_PLAINTEXT", users=users)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2
    assert f"--sasl-users: {users}: mode 0640" in proc.stderr


def test_broker_user_command_takes_the_password_from_stdin_only(tmp_path):
    path = tmp_path / "users.toml"
    password = new_password()
    proc = subprocess.run([sys.executable, "-m", "appliance", "broker-user",
                           "add", "--file", str(path), "--user", "bob", "--password-stdin"],
                          input=password + "\n", capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert password not in proc.stderr + proc.stdout + path.read_text()
    cred = load_users(path).lookup("SCRAM-SHA-512", "bob")
    assert cred is not None and cred.verify_password(scram.SHA_512, password)
    assert hmac.compare_digest(cred.stored_key, scram.SHA_512.h(scram.SHA_512.hmac(
        scram.SHA_512.salted_password(password, cred.salt, cred.iterations), b"Client Key")))


def _add_only_if_changed(path, user: str, password: str, *extra: str):
    return subprocess.run([sys.executable, "-m", "appliance", "broker-user", "add", "--file",
                           str(path), "--user", user, "--password-stdin", "--only-if-changed",
                           *extra], input=password + "\n", capture_output=True, text=True,
                          timeout=60, cwd=ROOT)


def test_broker_user_only_if_changed_rewrites_only_a_real_change(tmp_path):
    """Configuration management runs `add --only-if-changed` on every pass: the file (and
    so the broker's restart) changes only for a new user, a new password or new
    mechanisms, and the output says which."""
    path = tmp_path / "users.toml"
    password = new_password()
    runs = [_add_only_if_changed(path, "app", password, "--mechanisms", "SCRAM-SHA-512")]
    first = path.read_bytes()
    runs.append(_add_only_if_changed(path, "app", password, "--mechanisms", "SCRAM-SHA-512"))
    assert path.read_bytes() == first  # same salt: not rewritten
    runs.append(_add_only_if_changed(path, "app", password))  # both SCRAM mechanisms now
    both = path.read_bytes()
    runs.append(_add_only_if_changed(path, "app", password + "x"))  # a new password
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    assert [r.stdout.strip() for r in runs] == ["saved", "unchanged", "saved", "saved"]
    assert both != first and path.read_bytes() != both
    cred = load_users(path).lookup("SCRAM-SHA-256", "app")
    assert cred.verify_password(scram.SHA_256, password + "x")
    assert not cred.verify_password(scram.SHA_256, password)
    assert all(password not in r.stdout + r.stderr for r in runs)


def _doubled_nonce_final(client_first_bare: str, server_first: bytes, password: str,
                         mech, prefix: str) -> bytes:
    """A client-final as librdkafka before 2.6.1 builds it: ``prefix`` in front of the
    server's nonce, the proof over that very message."""
    attrs = dict(kv.split("=", 1) for kv in server_first.decode().split(","))
    salted = mech.salted_password(password, base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = mech.hmac(salted, b"Client Key")
    without_proof = f"c=biws,r={prefix}{attrs['r']}"
    auth = f"{client_first_bare},{server_first.decode()},{without_proof}".encode()
    proof = bytes(a ^ b for a, b in zip(client_key, mech.hmac(mech.h(client_key), auth),
                                        strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


@pytest.mark.parametrize("prefix, accepted", [("", True), ("cnonce", True),
                                              ("other", False)])
def test_scram_nonce_is_the_servers_or_librdkafkas_doubled_form(prefix, accepted):
    """RFC 5802's final nonce is the server's; librdkafka before 2.6.1 (Debian 12's kcat)
    puts its own nonce in front once more, which Kafka 3.8.1-3.9 accept too. Anything
    else (here another prefix) is refused: the server's random part must come back after
    exactly the client's nonce."""
    cred = scram.ScramCredential.derive(scram.SHA_512, "pencil")
    server = scram.ScramServer(scram.SHA_512, lambda u: cred if u == "user" else None)
    first = server.first(b"n,,n=user,r=cnonce")
    final = _doubled_nonce_final("n=user,r=cnonce", first, "pencil", scram.SHA_512, prefix)
    if accepted:
        assert server.final(final).startswith(b"v=") and server.user == "user"
    else:
        with pytest.raises(scram.ScramError, match="nonce does not match"):
            server.final(final)


def test_sasl_handshake_v0_then_bare_token_frames(sasl_broker):
    """SaslHandshake v0 (listed for librdkafka before 2.1): the SCRAM tokens then travel as
    bare size-prefixed frames, the answers too, and the connection is authenticated; a
    wrong password gets no answer frame, only the close."""
    mech = scram.SHA_512
    with WireClient(sasl_broker.bootstrap) as c:
        assert c.request(schemas.SASL_HANDSHAKE, 0, {"mechanism": mech.name})[
            "error_code"] == errors.NONE
        nonce = "v0nonce"
        c.send_raw(struct.pack(">i", len(first := f"n,,n={USER},r={nonce}".encode())) + first)
        server_first = c.recv_frame()
        assert server_first.startswith(f"r={nonce}".encode())
        final = _doubled_nonce_final(f"n={USER},r={nonce}", server_first,
                                     sasl_broker.password, mech, "")
        c.send_raw(struct.pack(">i", len(final)) + final)
        assert c.recv_frame().startswith(b"v=")
        assert metadata(c)["topics"]  # authenticated: every API open
    with WireClient(sasl_broker.bootstrap) as c:
        c.request(schemas.SASL_HANDSHAKE, 0, {"mechanism": mech.name})
        c.send_raw(struct.pack(">i", len(first := f"n,,n={USER},r=x".encode())) + first)
        server_first = c.recv_frame()
        final = _doubled_nonce_final(f"n={USER},r=x", server_first, "wrong", mech, "")
        c.send_raw(struct.pack(">i", len(final)) + final)
        assert _closed(c)
