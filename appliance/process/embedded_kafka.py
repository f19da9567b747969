"""The embedded broker ``appliance run`` starts when no Kafka is configured.

It listens where a Kafka client looks first, 127.0.0.1:9092 (``[kafka] embedded_port``), so
the documented next commands (``loadgen run --bootstrap 127.0.0.1:9092``, Locust's
``--host 127.0.0.1:9092``) reach it as written. A port someone else holds is checked before
the broker's process starts, so the operator gets one line naming the port and the key to
change rather than the broker's start-up log.

Its groups accept sessions down to ``[ha] session_timeout``'s floor (1 s), where Kafka's
default minimum is 6 s: a pair elected through it takes over after a crash in seconds.

The broker process starts with SIGINT blocked. Ctrl-C on a terminal signals the whole
foreground process group; the broker would stop at once, before the appliance has stopped
its query, and the query's last writes and the appliance's own consumers would fail
loudly during what is a clean stop. The appliance stops its broker last (SIGTERM), as it
does under a supervisor.
"""

from __future__ import annotations

import errno
import signal
import socket
from pathlib import Path

from appliance.broker import EmbeddedBroker
from appliance.config import HA_SESSION_MIN_MS, KafkaConfig

HOST = "127.0.0.1"


class EmbeddedPortInUse(Exception):
    """``str()`` is the one line ``appliance run`` prints before exiting 2."""


def port_taken(host: str, port: int) -> bool:
    """Whether something listens on ``host:port`` (a bind the broker would also fail).

    SO_REUSEADDR as the broker's own listener has it, so connections of an earlier run
    still in TIME_WAIT do not count as taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def start_embedded(kafka: KafkaConfig, log_path: Path | None = None) -> EmbeddedBroker:
    """A started broker on ``kafka.embedded_port`` (0: any free port); its log goes to
    ``log_path`` (default: a file of its own)."""
    port = kafka.embedded_port
    if port and port_taken(HOST, port):
        raise EmbeddedPortInUse(
            f"kafka.embedded_port: {HOST}:{port} is already in use (another broker or "
            f"appliance?); set [kafka] embedded_port (or APPLIANCE_KAFKA_EMBEDDED_PORT) to "
            f"a free port, 0 for any, or bootstrap_servers to use the Kafka that is there")
    # A pair's session may be as short as [ha] allows (Kafka's default minimum is 6 s).
    broker = EmbeddedBroker(host=HOST, port=port, log_path=log_path, extra_args=[
        "--group-min-session-timeout-ms", str(HA_SESSION_MIN_MS)])
    # A blocked signal stays blocked across fork and exec; this thread's mask is restored.
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        broker.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
    return broker
