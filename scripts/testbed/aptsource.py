"""How this machine reaches Debian, so the test bed's hosts reach it the same way.

Read from the machine's own apt configuration (deb822 ``*.sources`` and one-line
``*.list`` files, ``Acquire::http::Proxy``, ``http_proxy``) rather than hard-coded: in CI
and here the mirror may be a local stand-in for deb.debian.org, a snapshot whose Release
files are past their Valid-Until date, or behind a proxy.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

SUITE = "bookworm"
DEFAULT_URIS = {"debian": "http://deb.debian.org/debian",
                "security": "http://deb.debian.org/debian-security"}


@dataclass(frozen=True)
class Mirror:
    uris: dict[str, str]           # "debian" / "security" -> base URI
    upstream_proxy: str | None     # host:port apt on this machine goes through, if any
    check_valid_until: bool

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(sorted({urlsplit(u).hostname or "" for u in self.uris.values()} - {""}))

    def sources_lines(self) -> list[str]:
        main, security = self.uris["debian"], self.uris["security"]
        return [f"deb {main} {SUITE} main", f"deb {main} {SUITE}-updates main",
                f"deb {security} {SUITE}-security main"]

    def apt_options(self) -> list[str]:
        return [] if self.check_valid_until else ['Acquire::Check-Valid-Until "false"']

    def proxy_env(self) -> dict[str, str]:
        if not self.upstream_proxy:
            return {}
        return {"http_proxy": f"http://{self.upstream_proxy}"}


def _source_uris(root: Path) -> list[str]:
    uris: list[str] = []
    files = [root / "sources.list", *sorted((root / "sources.list.d").glob("*"))]
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".sources":
            enabled = "enabled: no" not in text.lower()
            for line in text.splitlines():
                if enabled and line.lower().startswith("uris:"):
                    uris += line.split(":", 1)[1].split()
        elif path.suffix == ".list" or path.name == "sources.list":
            for line in text.splitlines():
                parts = line.split("#", 1)[0].split()
                if parts[:1] == ["deb"]:
                    uris += [p for p in parts[1:] if "://" in p][:1]
    return uris


def _apt_config(key: str) -> str:
    try:
        out = subprocess.run(["apt-config", "shell", "V", key], capture_output=True,
                             text=True, check=False).stdout
    except OSError:
        return ""
    # prints V='value'
    return out.strip().removeprefix("V=").strip("'") if out.strip() else ""


def detect(root: Path = Path("/etc/apt")) -> Mirror:
    uris = dict(DEFAULT_URIS)
    for uri in _source_uris(root):
        if not uri.startswith("http://"):
            continue
        kind = "security" if uri.rstrip("/").endswith("-security") else "debian"
        if kind == "debian" and not uri.rstrip("/").endswith("/debian"):
            continue  # a third-party repository, not the distribution
        uris[kind] = uri.rstrip("/")
    proxy = _apt_config("Acquire::http::Proxy") or os.environ.get("http_proxy", "")
    upstream = None
    if proxy and proxy.upper() != "DIRECT":
        url = urlsplit(proxy)
        upstream = f"{url.hostname}:{url.port or 80}"
    valid = _apt_config("Acquire::Check-Valid-Until").lower() not in ("false", "0", "no")
    return Mirror(uris=uris, upstream_proxy=upstream, check_valid_until=valid)
