"""The one line ``appliance run`` prints for a person on a terminal once it is ready.

The JSON event ``appliance.ready`` carries the same facts for machines; a person wants
them in a sentence: where Kafka is (and whether it is the embedded broker), which topics
to write to and read from, where the metrics and the full log are, and the command to put
load on it.
"""

from __future__ import annotations

from pathlib import Path

from appliance.config import TopicsConfig


def metrics_url(host: str, port: int | None) -> str | None:
    return f"http://{host}:{port}/metrics" if port else None


def ready_line(bootstrap: str, embedded: bool, topics: TopicsConfig, metrics: str | None,
               log_file: Path | None) -> str:
    kafka = f"Kafka {bootstrap}" + (" (embedded broker)" if embedded else "")
    parts = [kafka,
             f"events in {topics.events}, alerts out {topics.alerts}, "
             f"dead letters {topics.dead_letters}"]
    if metrics:
        parts.append(f"metrics {metrics}")
    if log_file is not None:
        parts.append(f"full log {log_file}")
    load = f"loadgen run --bootstrap-server {bootstrap} --rate 500 --duration 30s"
    return f"appliance ready: {'; '.join(parts)}. Load it: {load}  (Ctrl-C stops it)"
