"""What the optional parts of the install bring, and the one line that names a missing one.

``pip install appliance`` brings what ``appliance run`` and the broker need. The load
generator (and Locust, and its report plots), and the dashboards' publishing and
rendering, need more: they come as extras, ``appliance[loadgen]``, ``appliance[dashboards]``,
or all of them as ``appliance[tools]`` (pyproject.toml; a test holds this table to it).
A command whose extra is missing says so in one line and exits 2: like a bad flag, it is
fixed by the operator (the install) before running again, and nothing was started.

Standard library only: the check runs before the command imports anything heavy.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

#: ``appliance[tools]``: every extra below.
TOOLS = "tools"


@dataclass(frozen=True)
class Extra:
    """One ``appliance[name]`` extra: the modules its commands import, each with the
    distribution (pyproject.toml's name) that provides it."""

    name: str
    modules: dict[str, str]
    purpose: str


EXTRAS: dict[str, Extra] = {extra.name: extra for extra in (
    Extra("loadgen", {"confluent_kafka": "confluent-kafka", "hdrh": "hdrhistogram",
                      "matplotlib": "matplotlib", "numpy": "numpy", "locust": "locust"},
          "the load generator (loadgen, appliance demo), its report plots and Locust"),
    Extra("dashboards", {"grafana_client": "grafana-client", "matplotlib": "matplotlib",
                         "numpy": "numpy"},
          "publishing dashboards to Grafana and rendering their panels"),
)}


class MissingExtra(Exception):
    """``str()``: the one line to print before exiting 2."""


def missing(extra: str) -> list[str]:
    """The distributions of ``extra`` whose modules cannot be imported here."""
    modules = EXTRAS[extra].modules
    return sorted({dist for module, dist in modules.items()
                   if importlib.util.find_spec(module) is None})


def require(extra: str, command: str) -> None:
    """MissingExtra naming the extra, what is missing and the pip line, unless all
    of ``extra`` is installed."""
    absent = missing(extra)
    if absent:
        raise MissingExtra(f"{command}: needs the {extra} extra ({', '.join(absent)} not "
                           f"installed): pip install 'appliance[{extra}]'")
