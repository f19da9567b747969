"""``appliance dashboards publish``: folder, Prometheus datasource and dashboards to a Grafana.

Uses ``grafana-client``. Credentials come from the environment only, never the command
line (argv is visible to every user of the host): ``GRAFANA_TOKEN`` (a service-account
token, the name ``grafana-client``'s own ``from_env`` reads) or ``GRAFANA_USER`` and
``GRAFANA_PASSWORD`` (basic auth).

Idempotent, so that a deploy can run it every time and report "changed" only when it
changed something: the folder is created when missing; the datasource is created when
missing and, when ``--prometheus-url`` names the Prometheus (the deploy passes its own),
updated when its URL or settings differ (without it an existing datasource is left as its
owner configured it); a dashboard is uploaded (with ``overwrite``) only when Grafana's copy
differs from the committed JSON. The last line says ``unchanged`` or what changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

import yaml
from grafana_client import GrafanaApi
from grafana_client.client import GrafanaClientError, GrafanaException, GrafanaServerError

from dashboards import catalog

TIMEOUT_S = 10.0


class UsageError(Exception):
    """Bad arguments or environment (exit 2)."""


class PublishError(Exception):
    """Grafana refused or could not be reached (exit 1, one line)."""


@dataclass(frozen=True)
class Target:
    url: str
    credential: str | tuple[str, str]
    auth_kind: str  # "token" | "basic"


def target_from(url: str | None, environ: dict[str, str]) -> Target:
    """The Grafana to publish to, from ``--url``/``GRAFANA_URL`` and the credential env."""
    url = url or environ.get("GRAFANA_URL")
    if not url:
        raise UsageError("--url: missing (or set GRAFANA_URL), e.g. http://grafana:3000")
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise UsageError(f"--url: want http(s)://host[:port][/path], got {url!r}")
    if parsed.username or parsed.password:
        raise UsageError("--url: must not carry credentials; set GRAFANA_TOKEN, or "
                         "GRAFANA_USER and GRAFANA_PASSWORD, in the environment")
    token = environ.get("GRAFANA_TOKEN")
    if token:
        return Target(url.rstrip("/"), token, "token")
    user, password = environ.get("GRAFANA_USER"), environ.get("GRAFANA_PASSWORD")
    if user and password:
        return Target(url.rstrip("/"), (user, password), "basic")
    raise UsageError("credentials: set GRAFANA_TOKEN, or GRAFANA_USER and GRAFANA_PASSWORD, "
                     "in the environment")


def datasource_body(prometheus_url: str | None = None) -> dict:
    """The datasource as provisioned (``grafana/provisioning/datasources``), as API JSON."""
    path = catalog.PROVISIONING_DIR / "datasources" / "prometheus.yml"
    (source,) = yaml.safe_load(path.read_text(encoding="utf-8"))["datasources"]
    body = {k: source[k] for k in ("name", "uid", "type", "access", "url", "isDefault",
                                   "jsonData") if k in source}
    if prometheus_url:
        body["url"] = prometheus_url
    return body


# Fields Grafana sets on a stored dashboard itself: not part of its content.
_SERVER_FIELDS = ("id", "version", "iteration")


@dataclass(frozen=True)
class Outcome:
    """What a publish did: the number of dashboards, and what it created or changed."""

    dashboards: int
    changes: tuple[str, ...]

    def summary(self) -> str:
        return ", ".join(self.changes) if self.changes else "unchanged"


def _missing(exc: GrafanaClientError) -> bool:
    return exc.status_code == 404


def _get(call, *args) -> dict | None:
    """A GET that answers 404 for "not there"."""
    try:
        return call(*args)
    except GrafanaClientError as exc:
        if not _missing(exc):
            raise
        return None


def _differs(current: dict, wanted: dict) -> bool:
    """Whether ``current`` (Grafana's copy) lacks or contradicts anything in ``wanted``
    (fields Grafana adds itself, like ``id`` or extra ``jsonData`` defaults, are fine)."""
    for key, value in wanted.items():
        if isinstance(value, dict):
            if not isinstance(current.get(key), dict) or _differs(current[key], value):
                return True
        elif current.get(key) != value:
            return True
    return False


def _content(model: dict) -> dict:
    return {k: v for k, v in model.items() if k not in _SERVER_FIELDS}


def _publish(api: GrafanaApi, prometheus_url: str | None, say) -> Outcome:
    changes: list[str] = []
    folder = f"folder {catalog.FOLDER_TITLE!r} (uid {catalog.FOLDER_UID})"
    if _get(api.folder.get_folder, catalog.FOLDER_UID) is None:
        api.folder.create_folder(catalog.FOLDER_TITLE, uid=catalog.FOLDER_UID)
        say(f"{folder}: created")
        changes.append("folder created")
    else:
        say(f"{folder}: exists")
    source = f"datasource uid {catalog.DATASOURCE_UID}"
    body = datasource_body(prometheus_url)
    current = _get(api.datasource.get_datasource_by_uid, catalog.DATASOURCE_UID)
    if current is None:
        api.datasource.create_datasource(body)
        say(f"{source}: created ({body['url']})")
        changes.append("datasource created")
    elif prometheus_url is None:
        say(f"{source}: exists, left as is (no --prometheus-url)")
    elif _differs(current, body):
        api.datasource.update_datasource_by_uid(catalog.DATASOURCE_UID, {**current, **body})
        say(f"{source}: updated ({current.get('url')} -> {body['url']})")
        changes.append("datasource updated")
    else:
        say(f"{source}: unchanged ({body['url']})")
    boards = catalog.load()
    for board in boards:
        name = f"dashboard {board.title!r} (uid {board.uid})"
        model = _content(board.model())
        stored = _get(api.dashboard.get_dashboard, board.uid)
        if stored is not None and _content(stored.get("dashboard", {})) == model \
                and stored.get("meta", {}).get("folderUid") == catalog.FOLDER_UID:
            say(f"{name}: unchanged")
            continue
        api.dashboard.update_dashboard({
            "dashboard": model, "folderUid": catalog.FOLDER_UID, "overwrite": True,
            "message": "appliance dashboards publish"})
        say(f"{name}: {'uploaded' if stored is None else 'updated'}")
        changes.append(f"dashboard {board.uid} {'uploaded' if stored is None else 'updated'}")
    return Outcome(len(boards), tuple(changes))


def publish(target: Target, prometheus_url: str | None = None, say=print) -> Outcome:
    """Upload what differs; returns what was done. Raises ``PublishError``."""
    api = GrafanaApi.from_url(target.url, credential=target.credential, timeout=TIMEOUT_S)
    where = f"Grafana at {target.url}"
    try:
        return _publish(api, prometheus_url, say)
    except GrafanaClientError as exc:
        if exc.status_code in (401, 403):
            raise PublishError(f"{where} refused the {target.auth_kind} credentials "
                               f"(HTTP {exc.status_code}); check GRAFANA_TOKEN or "
                               "GRAFANA_USER/GRAFANA_PASSWORD") from None
        raise PublishError(f"{where} rejected a request (HTTP {exc.status_code}): "
                           f"{_short(exc.message)}") from None
    except GrafanaServerError as exc:
        raise PublishError(f"{where} failed (HTTP {exc.status_code}): "
                           f"{_short(exc.message)}") from None
    except GrafanaException as exc:
        raise PublishError(f"{where} is unreachable: {_short(exc.message)}") from None
    except Exception as exc:  # connection refused, DNS, TLS: the HTTP library's own types
        raise PublishError(f"{where} is unreachable: {_short(str(exc))}") from None


def _short(text: str) -> str:
    return " ".join(str(text).split())[:300]
