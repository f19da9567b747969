"""Filters the site role's preflight uses: checks whose findings are lines an operator can
act on.

Jinja can compare and group values, but the findings have to be one line per problem,
naming variables and hosts and never a secret's value: that is plain Python here, unit
tested in tests/deploy/test_site_filters.py.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

#: The example vault's placeholders all start with this (inventories/*/vault.yml.example).
PLACEHOLDER_PREFIX = "change-me"


def weak_secrets(values: Mapping[str, object], minimums: Mapping[str, int]) -> list[str]:
    """``values``: variable name -> its value ("" or None when unset: whether a secret is
    required is its role's check); ``minimums``: name (or ``name.*`` for every value of a
    dict) -> the shortest length accepted. One finding per secret that is still a
    placeholder or too short, naming it, never its value."""
    findings = []
    for pattern, minimum in minimums.items():
        name = pattern.removesuffix(".*")
        value = values.get(name)
        if value is None or value == "":
            continue
        if pattern.endswith(".*"):
            if not isinstance(value, Mapping):
                findings.append(f"{name} must be a mapping of name to secret")
                continue
            secrets = {f"{name}.{key}": secret for key, secret in value.items()}
        else:
            secrets = {name: value}
        for label, secret in secrets.items():
            text = "" if secret is None else str(secret)
            if text.startswith(PLACEHOLDER_PREFIX):
                findings.append(f"{label} is still the example vault's placeholder")
            elif len(text) < int(minimum):
                findings.append(f"{label} is shorter than {int(minimum)} characters")
    return findings


def _fingerprint(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def disagreements(views: Mapping[str, Mapping[str, object]], settings: Iterable[str],
                  secrets: Iterable[str] = ()) -> list[str]:
    """``views``: host -> {setting: the value that host would use}. One line per setting
    whose hosts disagree, naming each value's hosts; a secret's values are not shown,
    only which hosts share one."""
    findings = []
    secret_names = set(secrets)
    for setting in [*settings, *secret_names]:
        groups: dict[str, list[str]] = {}
        shown: dict[str, str] = {}
        for host in sorted(views):
            value = views[host].get(setting)
            key = _fingerprint(value)
            groups.setdefault(key, []).append(host)
            shown.setdefault(key, json.dumps(value, default=str))
        if len(groups) < 2:
            continue
        parts = []
        for number, (key, hosts) in enumerate(sorted(groups.items(), key=lambda g: g[1]),
                                              start=1):
            what = f"value {number}" if setting in secret_names else shown[key]
            parts.append(f"{what} on {', '.join(hosts)}")
        findings.append(f"{setting} differs across hosts ({'; '.join(parts)}): set it once,"
                        " for every host (group_vars/all)")
    return findings


class FilterModule:
    """Ansible's entry point for the filters above."""

    def filters(self):
        return {"weak_secrets": weak_secrets, "disagreements": disagreements}
