"""``appliance dashboards publish``: folder, Prometheus datasource and dashboards to a Grafana.

Uses ``grafana-client``. Credentials come from the environment only, never the command
line (argv is visible to every user of the host): ``GRAFANA_TOKEN`` (a service-account
token, the name ``grafana-client``'s own ``from_env`` reads) or ``GRAFANA_USER`` and
``GRAFANA_PASSWORD`` (basic auth). The folder and the datasource are created when missing
(an existing datasource is left as its owner configured it); every dashboard is uploaded
with ``overwrite`` so a second publish replaces the first.
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


def _missing(exc: GrafanaClientError) -> bool:
    return exc.status_code == 404


def _publish(api: GrafanaApi, prometheus_url: str | None, say) -> int:
    try:
        api.folder.get_folder(catalog.FOLDER_UID)
        say(f"folder {catalog.FOLDER_TITLE!r} (uid {catalog.FOLDER_UID}): exists")
    except GrafanaClientError as exc:
        if not _missing(exc):
            raise
        api.folder.create_folder(catalog.FOLDER_TITLE, uid=catalog.FOLDER_UID)
        say(f"folder {catalog.FOLDER_TITLE!r} (uid {catalog.FOLDER_UID}): created")
    try:
        api.datasource.get_datasource_by_uid(catalog.DATASOURCE_UID)
        say(f"datasource uid {catalog.DATASOURCE_UID}: exists, left as is")
    except GrafanaClientError as exc:
        if not _missing(exc):
            raise
        body = datasource_body(prometheus_url)
        api.datasource.create_datasource(body)
        say(f"datasource uid {catalog.DATASOURCE_UID}: created ({body['url']})")
    boards = catalog.load()
    for board in boards:
        model = board.model()
        model.pop("id", None)
        api.dashboard.update_dashboard({
            "dashboard": model, "folderUid": catalog.FOLDER_UID, "overwrite": True,
            "message": "appliance dashboards publish"})
        say(f"dashboard {board.title!r} (uid {board.uid}): uploaded")
    return len(boards)


def publish(target: Target, prometheus_url: str | None = None, say=print) -> int:
    """Upload everything; returns the number of dashboards. Raises ``PublishError``."""
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
