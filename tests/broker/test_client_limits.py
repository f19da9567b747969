"""No single client stalls the broker: the per-IP connection cap (before TLS), the cap on
partitions per topic, and logins that flood the broker while a logged-in client produces.

Loopback has many addresses: the flooding or capped client connects from 127.0.0.2, the
bystander from 127.0.0.1, so the per-IP cap tells them apart as it would two hosts.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from appliance.broker import EmbeddedBroker
from appliance.broker.security.credentials import add_user
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.client import WireClient
from bench._login_flood import PASSWORD_ENV, LoginRefused, login

from support.broker.java_programs import ROOT
from support.scrape import metric
from support.secure_helpers import broker_args, make_tls, new_password
from support.wire_helpers import batch, produce

OTHER_IP = "127.0.0.2"



def _events(log_path: Path, name: str) -> list[dict]:
    out = []
    for line in log_path.read_text().splitlines():
        if f'"{name}"' in line:
            event = json.loads(line)
            if event.get("event") == name:
                out.append(event)
    return out


def _api_versions(c: WireClient) -> int:
    return c.request(schemas.API_VERSIONS, 3, {"client_software_name": "t",
                                                "client_software_version": "1"})["error_code"]


def _refused(source_ip: str, bootstrap: str) -> bool:
    """Does the broker close a new connection from ``source_ip`` before answering?"""
    try:
        with WireClient(bootstrap, source_ip=source_ip) as c:
            _api_versions(c)
    except OSError:  # reset or closed: ConnectionError is an OSError
        return True
    return False


def test_connection_cap_refuses_connection_n_plus_1_from_one_ip(tmp_path):
    args = ["--max-connections-per-ip", "3", "--metrics-port", "0"]
    with EmbeddedBroker(extra_args=args, log_path=tmp_path / "broker.log") as b:
        held = [WireClient(b.bootstrap, source_ip=OTHER_IP) for _ in range(3)]
        try:
            for c in held:
                assert _api_versions(c) == errors.NONE
            for _ in range(5):
                assert _refused(OTHER_IP, b.bootstrap)
            assert not _refused("127.0.0.1", b.bootstrap)  # another address is not capped
            for c in held:  # the three admitted keep working
                assert _api_versions(c) == errors.NONE
            assert metric(b.metrics_url, "broker_connections_refused_total") == 5
            (event,) = _events(b.log_path, "broker.connection_refused")  # one line, not 5
            assert (event["ip"], event["limit"], event["open_connections"]) == (OTHER_IP, 3, 3)
            assert event["setting"] == "--max-connections-per-ip"
            held.pop().close()
            deadline = time.monotonic() + 10  # the broker sees the close asynchronously
            while _refused(OTHER_IP, b.bootstrap) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not _refused(OTHER_IP, b.bootstrap)  # a slot freed is a slot again
        finally:
            for c in held:
                c.close()


def test_tls_listener_closes_a_connection_over_the_cap_before_its_handshake(tmp_path):
    tls = make_tls(tmp_path / "tls")
    args = broker_args("SSL", tls) + ["--max-connections-per-ip", "1"]
    with EmbeddedBroker(extra_args=args, log_path=tmp_path / "broker.log") as b:
        host, port = b.bootstrap.rsplit(":", 1)
        context = ssl.create_default_context(cafile=str(tls.ca))
        # Under the cap, a TCP connection that has not said hello is waited for ...
        with socket.create_connection((host, int(port)), source_address=(OTHER_IP, 0)) as idle:
            idle.settimeout(1.0)
            with pytest.raises(TimeoutError):
                idle.recv(1)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until the broker has seen that close
            try:
                admitted = context.wrap_socket(socket.create_connection(
                    (host, int(port)), source_address=(OTHER_IP, 0), timeout=10),
                    server_hostname="localhost")
                break
            except OSError:
                time.sleep(0.05)
        with admitted:  # ... one TLS connection holds the only slot ...
            with socket.create_connection((host, int(port)), timeout=10,
                                          source_address=(OTHER_IP, 0)) as over:
                # ... and the next is closed at once, with no TLS byte sent or read.
                try:
                    assert over.recv(1) == b""
                except ConnectionResetError:
                    pass
    assert _events(b.log_path, "broker.connection_refused")


def _held_then_closed(source_ip: str, bootstrap: str, held_s: float = 0.5) -> float:
    """Connect from ``source_ip`` and send ApiVersions: assert no answer for ``held_s``,
    then the close; returns the seconds from connect to the close."""
    host, port = bootstrap.rsplit(":", 1)
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=10,
                                  source_address=(source_ip, 0)) as sock:
        client_id = b"held"
        body = struct.pack(">hhih", schemas.API_VERSIONS.key, 0, 1, len(client_id)) + client_id
        sock.sendall(struct.pack(">i", len(body)) + body)
        sock.settimeout(held_s)
        with pytest.raises(TimeoutError):
            sock.recv(1)  # held: the request is not even read
        sock.settimeout(10)
        try:
            assert sock.recv(1) == b""
        except ConnectionResetError:
            pass
    return time.monotonic() - started


def test_connections_over_the_creation_rate_are_held_unread_then_closed(tmp_path):
    """Half a connection a second: one (the burst), then a token every 2 s (the bucket's
    arithmetic is tests/broker/test_connection_rate.py's, on a clock of its own)."""
    args = ["--max-connection-creation-rate-per-ip", "0.5", "--metrics-port", "0"]
    with EmbeddedBroker(extra_args=args, log_path=tmp_path / "broker.log") as b:
        admitted = WireClient(b.bootstrap, source_ip=OTHER_IP)
        took_token = time.monotonic()
        try:
            assert _api_versions(admitted) == errors.NONE
            with ThreadPoolExecutor(3) as pool:  # the next ones, at once
                held_for = list(pool.map(lambda _: _held_then_closed(OTHER_IP, b.bootstrap),
                                         range(3)))
            # closed after THROTTLED_CLOSE_S (1 s), not at once: a reconnecting client slows
            assert all(0.9 <= s < 5 for s in held_for), held_for
            with WireClient(b.bootstrap, source_ip="127.0.0.1") as c:  # another address
                assert _api_versions(c) == errors.NONE
            assert _api_versions(admitted) == errors.NONE  # the admitted one keeps working
            # the held ones took no token: 2 s after the first, there is one again
            time.sleep(max(0.0, took_token + 2.5 - time.monotonic()))
            with WireClient(b.bootstrap, source_ip=OTHER_IP) as c:
                assert _api_versions(c) == errors.NONE
        finally:
            admitted.close()
        assert metric(b.metrics_url, "broker_connections_throttled_total") == 3
        assert metric(b.metrics_url, "broker_connections_refused_total") == 0
        (event,) = _events(b.log_path, "broker.connection_throttled")  # one line, not 3
        assert (event["ip"], event["limit"]) == (OTHER_IP, 0.5)
        assert event["setting"] == "--max-connection-creation-rate-per-ip"


def test_tls_listener_holds_a_connection_over_the_rate_before_its_handshake(tmp_path):
    tls = make_tls(tmp_path / "tls")
    args = broker_args("SSL", tls) + ["--max-connection-creation-rate-per-ip", "1",
                                      "--metrics-port", "0"]
    with EmbeddedBroker(extra_args=args, log_path=tmp_path / "broker.log") as b:
        host, port = b.bootstrap.rsplit(":", 1)
        context = ssl.create_default_context(cafile=str(tls.ca))
        assert _tls_api_versions(host, int(port), context) == errors.NONE  # the one token
        with socket.create_connection((host, int(port)), timeout=10,
                                      source_address=("127.0.0.1", 0)) as raw:
            raw.sendall(b"\x16\x03\x01\x00\x05hello")  # a ClientHello's first bytes
            raw.settimeout(0.5)
            with pytest.raises(TimeoutError):
                raw.recv(1)  # no ServerHello, no alert: the bytes were never read
            raw.settimeout(10)
            try:
                assert raw.recv(1) == b""
            except ConnectionResetError:
                pass
        assert metric(b.metrics_url, "broker_connections_throttled_total") == 1
        assert not _events(b.log_path, "broker.tls_handshake_failed")
        time.sleep(1.0)  # a token again (1 a second): served in full
        assert _tls_api_versions(host, int(port), context) == errors.NONE


def _tls_api_versions(host: str, port: int, context: ssl.SSLContext) -> int:
    """One TLS connection whose hello leaves at once, then ApiVersions v0: its error code."""
    client_id = b"tls-burst"
    body = struct.pack(">hhih", schemas.API_VERSIONS.key, 0, 7, len(client_id)) + client_id
    with context.wrap_socket(socket.create_connection((host, port), timeout=30),
                             server_hostname="localhost") as tls:
        tls.sendall(struct.pack(">i", len(body)) + body)
        head = b""
        while len(head) < 10:  # size, correlation id, error code
            chunk = tls.recv(10 - len(head))
            assert chunk, "closed before the answer"
            head += chunk
    size, correlation, error = struct.unpack(">iih", head)
    assert correlation == 7 and size > 6
    return error


def test_tls_clients_that_say_hello_at_once_are_all_served(tmp_path):
    """A client's ClientHello leaves with its connect; none may reach the Kafka frame
    parser (seen once as 'frame size out of range' of 0x16030102, a TLS record header)."""
    tls = make_tls(tmp_path / "tls")
    with EmbeddedBroker(extra_args=broker_args("SSL", tls),
                        log_path=tmp_path / "broker.log") as b:
        host, port = b.bootstrap.rsplit(":", 1)
        context = ssl.create_default_context(cafile=str(tls.ca))
        with ThreadPoolExecutor(8) as pool:
            errors_seen = list(pool.map(lambda _: _tls_api_versions(host, int(port), context),
                                        range(40)))
    assert errors_seen == [0] * 40
    assert not _events(b.log_path, "broker.connection_closed")
    assert not _events(b.log_path, "broker.tls_handshake_failed")


def test_partitions_per_topic_are_capped_with_policy_violation(tmp_path):
    args = ["--max-partitions-per-topic", "4"]
    with EmbeddedBroker(extra_args=args, log_path=tmp_path / "broker.log") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        too_many = admin.create_topics([NewTopic("wide", 5, 1)], operation_timeout=10)["wide"]
        err = too_many.exception(timeout=30).args[0]
        assert err.code() == ck.KafkaError.POLICY_VIOLATION
        assert "--max-partitions-per-topic" in err.str() and "(4," in err.str()
        admin.create_topics([NewTopic("wide", 4, 1)])["wide"].result(timeout=30)
        grow = admin.create_partitions([NewPartitions("wide", 5)])["wide"]
        assert grow.exception(timeout=30).args[0].code() == ck.KafkaError.POLICY_VIOLATION
        with WireClient(b.bootstrap) as c:  # and nothing was half-done: still 4, all usable
            meta = c.request(schemas.METADATA, 9, {"topics": [{"name": "wide",
                                                               "topic_id": None}],
                                                   "allow_auto_topic_creation": False})
            assert len(meta["topics"][0]["partitions"]) == 4
            assert produce(c, "wide", 3, batch([b"x"]))["error_code"] == errors.NONE


@pytest.mark.parametrize("flags, message", [
    (["--default-partitions", "5", "--max-partitions-per-topic", "4"],
     "broker: --default-partitions 5 is more than --max-partitions-per-topic 4"),
    (["--topics", "big:5", "--max-partitions-per-topic", "4"],
     "broker: --topics: topic 'big': 5 partitions is more than this broker allows per topic "
     "(4, --max-partitions-per-topic)"),
])
def test_partition_cap_at_start_is_one_line_and_exit_2(flags, message):
    proc = subprocess.run([sys.executable, "-m", "appliance", "broker", "--port", "0", *flags],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == message


def _sasl_broker(tmp_path: Path, password: str, iterations: int, *extra: str) -> EmbeddedBroker:
    users = tmp_path / "users.toml"
    add_user(users, "bystander", password)
    add_user(users, "flood", password, iterations=iterations)
    return EmbeddedBroker(log_path=tmp_path / "broker.log", extra_args=[
        *broker_args("SASL_PLAINTEXT", users=users, mechanisms="PLAIN,SCRAM-SHA-512"),
        "--topics", "by:1", "--metrics-port", "0", *extra])


def _bystander(bootstrap: str, password: str, count: int) -> float:
    """Log in (SCRAM), produce ``count`` records acks=all one at a time; when it finished."""
    with WireClient(bootstrap, timeout=60, source_ip="127.0.0.1") as c:
        login(c, "SCRAM-SHA-512", "bystander", password)
        for i in range(count):
            assert produce(c, "by", 0, batch([b"%d" % i]))["error_code"] == errors.NONE
    return time.monotonic()


def test_plain_password_checks_do_not_hold_up_a_logged_in_client(tmp_path):
    """Twelve PLAIN logins at once, each a PBKDF2 of 200,000 rounds (seconds of CPU in
    all): a client that logged in before produces 30 records while they are checked.
    Checked on the event loop, every check would stand between two of its produces."""
    password = new_password()
    with _sasl_broker(tmp_path, password, 200_000, "--password-check-workers", "1") as b:
        login_done: list[float] = []

        def flood_login(_: int) -> None:
            with WireClient(b.bootstrap, timeout=120, source_ip=OTHER_IP) as c:
                login(c, "PLAIN", "flood", password)
            login_done.append(time.monotonic())

        with ThreadPoolExecutor(12) as pool:
            logins = [pool.submit(flood_login, i) for i in range(12)]
            deadline = time.monotonic() + 30  # all twelve are at the broker's checker
            while (metric(b.metrics_url, "broker_connections_opened_total") < 12
                   and time.monotonic() < deadline):
                time.sleep(0.01)
            bystander_done = _bystander(b.bootstrap, password, 30)
            for f in logins:
                f.result(timeout=300)
        assert len(login_done) == 12  # every flood login did succeed, just later
        assert bystander_done < max(login_done), (
            "the logged-in client waited for every password check to finish")


def test_scram_login_flood_over_the_cap_leaves_a_logged_in_client_producing(tmp_path):
    """A process floods SCRAM logins over 60 connections at once from one address, capped
    at 20: connections past the cap are refused, logins go on, and a client that logged in
    from another address completes its produces while the flood runs."""
    password = new_password()
    with _sasl_broker(tmp_path, password, 4096, "--max-connections-per-ip", "20") as b:
        flood = subprocess.Popen(
            [sys.executable, "-m", "bench._login_flood", b.bootstrap, "--mechanism",
             "SCRAM-SHA-512", "--user", "flood", "--concurrency", "60", "--seconds", "30",
             "--source-ip", OTHER_IP], stdout=subprocess.PIPE, text=True, cwd=ROOT,
            env={**os.environ, PASSWORD_ENV: password, "PYTHONPATH": str(ROOT)})
        try:
            deadline = time.monotonic() + 30
            while (not _events(b.log_path, "broker.connection_refused")
                   and time.monotonic() < deadline):
                time.sleep(0.1)
            assert _events(b.log_path, "broker.connection_refused"), "never hit the cap"
            _bystander(b.bootstrap, password, 200)
            assert flood.poll() is None, "the flood ended before the bystander was done"
            out, _ = flood.communicate(timeout=120)
        finally:
            if flood.poll() is None:
                flood.kill()
                flood.wait()
        counts = json.loads(out.strip().splitlines()[-1])
        assert flood.returncode == 0 and counts["failed"] == 0
        assert counts["logins"] > 0 and counts["refused"] > 0
        assert metric(b.metrics_url, "broker_connections_refused_total") > 0


def test_a_second_authenticate_waits_until_the_password_check_is_answered(tmp_path):
    """One password check per connection at a time, what bounds the checker's queue: a
    pipelined second SaslAuthenticate is not even read until the first is answered (one
    request at a time per connection, as Kafka), and is then refused: the connection is
    authenticated already."""
    password = new_password()
    with _sasl_broker(tmp_path, password, 200_000) as b:
        with WireClient(b.bootstrap, timeout=120) as c:
            assert c.request(schemas.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})[
                "error_code"] == errors.NONE
            token = f"\0flood\0{password}".encode()
            first = c.encode(schemas.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
            second = c.encode(schemas.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
            c.send_raw(first + second)  # pipelined: the second arrives during the check
            answers = [c.decode_response(schemas.SASL_AUTHENTICATE, 2, c.recv_frame())[1]
                       for _ in range(2)]
        assert [a["error_code"] for a in answers] == [errors.NONE,
                                                      errors.ILLEGAL_SASL_STATE]


def _password_workers(broker_pid: int) -> list[int]:
    out = []
    for task in Path("/proc").glob("[0-9]*"):
        try:
            stat = (task / "stat").read_text()
            cmdline = (task / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == broker_pid and b"spawn_main" in cmdline:
            out.append(int(task.name))
    return out


def test_password_workers_are_replaced_when_one_dies_and_die_with_the_broker(tmp_path):
    password = new_password()
    with _sasl_broker(tmp_path, password, 4096) as b:
        with WireClient(b.bootstrap, timeout=60) as c:
            login(c, "PLAIN", "flood", password)
        (worker,) = _password_workers(b.proc.pid)
        os.kill(worker, 9)
        for _attempt in range(3):  # the check under way when a worker dies fails; retry
            try:
                with WireClient(b.bootstrap, timeout=60) as c:
                    login(c, "PLAIN", "flood", password)
                break
            except (OSError, LoginRefused):
                time.sleep(0.5)
        else:
            raise AssertionError("no PLAIN login after a password worker died")
        assert _events(b.log_path, "broker.password_worker_failed")
        (replacement,) = _password_workers(b.proc.pid)
        assert replacement != worker
        b.kill()
        deadline = time.monotonic() + 10
        while Path(f"/proc/{replacement}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not Path(f"/proc/{replacement}").exists(), "a worker outlived the kill -9"
