"""The appliance's HTTP endpoint: Prometheus metrics, and read-only JSON status pages.

One listener for both, so an operator's firewall rule and a deploy's scrape target stay
one port, and ``appliance rules reload`` finds the running appliance where Prometheus
does (``/-/rules`` gives its pid and the outcome of its last rules reload; the reload
itself is asked for with SIGHUP, which only the appliance's own user or root may send).
prometheus-client's ``start_http_server`` serves only metrics, so this is its WSGI app
behind a small router, on the same threading WSGI server.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.registry import Collector

#: A status page: a callable returning the JSON-ready document to serve.
Page = Callable[[], dict[str, Any]]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """Scrapes every few seconds are not news; the appliance logs what matters."""


def _app(registry: CollectorRegistry, pages: dict[str, Page]):
    metrics = make_wsgi_app(registry)

    def app(environ, start_response):
        page = pages.get(environ.get("PATH_INFO", ""))
        if page is None:
            return metrics(environ, start_response)
        body = json.dumps(page()).encode("utf-8")
        start_response("200 OK", [("Content-Type", "application/json"),
                                  ("Content-Length", str(len(body)))])
        return [body]

    return app


def serve(collectors: Iterable[Collector], host: str, port: int,
          pages: dict[str, Page] | None = None) -> tuple[WSGIServer, int]:
    """Start serving on a daemon thread; returns (server, bound port). Port 0 picks a free
    port. Stop with ``server.shutdown(); server.server_close()``."""
    registry = CollectorRegistry()
    for collector in collectors:
        registry.register(collector)
    server = make_server(host, port, _app(registry, pages or {}), _Server,
                         handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True)
    thread.start()
    return server, server.server_port
