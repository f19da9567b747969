"""What ``appliance watch`` scrapes: what runs beside it, not every job the scrape config
names.

``dashboards/prometheus/prometheus.yml`` names eight jobs (the appliance, the broker, the
load generator and five Spark ones). Scraping all of them beside the quick start's
``appliance run``, where only the appliance runs, made ``up == 0`` of the others page
(``BrokerDown``, critical, and ``SparkWorkerLost`` after a minute) with nothing wrong. So
the watch scrapes

- the appliance (``--appliance``, default 127.0.0.1:9464: what the watch is for), and
- each other component when asked (``--broker HOST:PORT``...), or once it is found
  answering at its default port with its own metrics (``broker_*`` at :9465...): from then
  on it is scraped, so if it dies later its alert fires.

Each job's targets are in a file Prometheus watches (``file_sd_configs``): a job with
none has no ``up`` series, and so no alert.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

from dashboards.watch_components import BY_NAME, COMPONENTS, Component

PROBE_TIMEOUT_S = 1.0
PROBE_MAX_BYTES = 4 << 20


def answers(component: Component, address: str) -> bool:
    """``address`` serves ``component``'s metrics now (an HTTP 200 page naming its
    metrics): another program on a common port such as 8080 does not count."""
    url = f"http://{address}{component.probe_path}"
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S) as answer:
            body = answer.read(PROBE_MAX_BYTES).decode("utf-8", errors="replace")
            return answer.status == 200 and component.marker in body
    except (urllib.error.URLError, OSError, ValueError):
        return False


class TargetFiles:
    """The ``file_sd_configs`` files of every job, one per job in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, job: str) -> Path:
        return self.directory / f"{job}.json"

    def clear(self) -> None:
        """Every job without targets (the start)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for component in COMPONENTS:
            for job in component.jobs:
                self._write(job, [])

    def scrape(self, component: Component, address: str) -> None:
        """Scrape ``address`` in every job of ``component`` from now on."""
        for job in component.jobs:
            self._write(job, [{"targets": [address]}])

    def _write(self, job: str, groups: list[dict]) -> None:
        # Replaced whole (rename), so Prometheus never reads half a file.
        path = self.path(job)
        partial = path.with_name(f".{path.name}.tmp")
        partial.write_text(json.dumps(groups), encoding="utf-8")
        os.replace(partial, path)


class Discovery:
    """The components looked for (not asked for by a flag): each is scraped from the first
    time it answers at its address, and stays scraped."""

    def __init__(self, look_for: dict[str, str], files: TargetFiles) -> None:
        self.waiting = dict(look_for)
        self.files = files

    def poll(self) -> list[tuple[Component, str]]:
        """Probe every component still waiting; those found now (already being scraped)."""
        found = []
        for name, address in list(self.waiting.items()):
            component = BY_NAME[name]
            if answers(component, address):
                self.files.scrape(component, address)
                del self.waiting[name]
                found.append((component, address))
        return found
