"""Loopback ports for tests that start a server of their own (metrics, Locust's UI) or
need an address nobody answers on."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port nobody listens on (right now: another process may take it before
    the test binds it, which a test reports as the port in use, not as its own bug)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
