"""A stand-in for the few Grafana HTTP API endpoints ``appliance dashboards publish`` uses.

A real Grafana cannot run here: it is not in Debian, nor in any PyPI or npm package this
machine can install, and no container registry is reachable. This server implements only
what publish calls, with Grafana's paths and status codes, and records every request
(method, path, Authorization header, JSON body) for the tests to check:

- ``GET /api/folders/<uid>`` (404 until created), ``POST /api/folders``
- ``GET /api/datasources/uid/<uid>`` (404 until created), ``POST /api/datasources``,
  ``PUT /api/datasources/uid/<uid>``
- ``GET /api/dashboards/uid/<uid>`` (404 until uploaded; the stored model with Grafana's
  own ``id`` and ``version`` added, and ``meta.folderUid``)
- ``POST /api/dashboards/db`` (412 "version-mismatch" for an existing uid without
  ``overwrite``, like Grafana)

``status`` forces every answer to one HTTP status (401, 503...) to test error handling.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Recorded:
    method: str
    path: str
    authorization: str | None
    body: dict | None


@dataclass
class GrafanaState:
    folders: dict[str, dict] = field(default_factory=dict)
    datasources: dict[str, dict] = field(default_factory=dict)
    dashboards: dict[str, dict] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    status: int | None = None


class _Handler(BaseHTTPRequestHandler):
    state: GrafanaState

    def log_message(self, *args) -> None:  # quiet
        pass

    def _reply(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self) -> dict | None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        self.state.requests.append(Recorded(self.command, self.path,
                                            self.headers.get("Authorization"), body))
        return body

    def do_GET(self) -> None:  # noqa: N802
        self._record()
        s = self.state
        if s.status:
            return self._reply(s.status, {"message": "forced"})
        if self.path.startswith("/api/folders/"):
            uid = self.path.rsplit("/", 1)[1]
            if uid in s.folders:
                return self._reply(200, s.folders[uid])
            return self._reply(404, {"message": "folder not found"})
        if self.path.startswith("/api/datasources/uid/"):
            uid = self.path.rsplit("/", 1)[1]
            if uid in s.datasources:
                return self._reply(200, s.datasources[uid])
            return self._reply(404, {"message": "Data source not found"})
        if self.path.startswith("/api/dashboards/uid/"):
            uid = self.path.rsplit("/", 1)[1]
            if uid in s.dashboards:
                upload = s.dashboards[uid]
                model = dict(upload["dashboard"], id=list(s.dashboards).index(uid) + 1,
                             version=s.versions[uid])
                return self._reply(200, {"dashboard": model,
                                         "meta": {"folderUid": upload.get("folderUid", "")}})
            return self._reply(404, {"message": "Dashboard not found"})
        return self._reply(404, {"message": "Not found"})

    def do_PUT(self) -> None:  # noqa: N802
        body = self._record() or {}
        s = self.state
        if s.status:
            return self._reply(s.status, {"message": "forced"})
        if self.path.startswith("/api/datasources/uid/"):
            uid = self.path.rsplit("/", 1)[1]
            if uid not in s.datasources:
                return self._reply(404, {"message": "Data source not found"})
            s.datasources[uid] = dict(body, id=s.datasources[uid]["id"])
            return self._reply(200, {"message": "Datasource updated",
                                     "datasource": s.datasources[uid]})
        return self._reply(404, {"message": "Not found"})

    def do_POST(self) -> None:  # noqa: N802
        body = self._record() or {}
        s = self.state
        if s.status:
            return self._reply(s.status, {"message": "forced"})
        if self.path == "/api/folders":
            s.folders[body["uid"]] = {"uid": body["uid"], "title": body["title"], "id": 1}
            return self._reply(200, s.folders[body["uid"]])
        if self.path == "/api/datasources":
            s.datasources[body["uid"]] = dict(body, id=len(s.datasources) + 1)
            return self._reply(200, {"message": "Datasource added", "id": 1,
                                     "datasource": s.datasources[body["uid"]]})
        if self.path == "/api/dashboards/db":
            uid = body["dashboard"]["uid"]
            if uid in s.dashboards and not body.get("overwrite"):
                return self._reply(412, {"status": "version-mismatch"})
            s.versions[uid] = s.versions.get(uid, 0) + 1
            s.dashboards[uid] = body
            return self._reply(200, {"status": "success", "uid": uid,
                                     "version": s.versions[uid]})
        return self._reply(404, {"message": "Not found"})


class GrafanaStandIn:
    def __init__(self) -> None:
        self.state = GrafanaState()
        handler = type("Handler", (_Handler,), {"state": self.state})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> GrafanaStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
