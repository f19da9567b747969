"""Reading a Prometheus endpoint the way a test asks of it: one sample, a sum over labels, or
every sample (parsed with prometheus_client's own text parser). Loopback only: no proxy."""

from __future__ import annotations

import re
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def metrics_text(url: str) -> str:
    with _DIRECT.open(url, timeout=10) as resp:
        return resp.read().decode()


def samples(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(name, sorted labels) -> value of every sample on the endpoint."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(metrics_text(url))
            for s in family.samples}


def metric(url: str, name: str) -> float:
    """The value of ``name``'s one unlabelled sample (AssertionError if there is none)."""
    for line in metrics_text(url).splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in {url}")


def metric_sum(url: str, name: str) -> float:
    """Sum of every sample of ``name`` (all label values) on the endpoint."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics_text(url).splitlines()
               if line.startswith((name + " ", name + "{")))


def appliance_metrics(port: int) -> dict[str, float]:
    """The ``appliance_*`` samples of an appliance's metrics port on loopback, keyed by the
    series as the exposition writes it (``name{label="value"}``)."""
    out = {}
    for line in metrics_text(f"http://127.0.0.1:{port}/metrics").splitlines():
        match = re.match(r"^(appliance_\w+(?:\{[^}]*\})?) (\S+)$", line)
        if match:
            out[match.group(1)] = float(match.group(2))
    return out
