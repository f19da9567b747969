"""Alert rules: load the YAML, and reject every rule the streaming query could not run.

Two passes, because a bad rule must be reported before the query starts and, where
possible, before a JVM starts: ``load_rule_set`` does every check that needs no Spark
(YAML shape, ids, severities, sizes, and each ``when`` read and type-checked as Spark's
analyzer would: ``appliance.rules.rule_types``), in milliseconds per thousand rules; the
running appliance then compiles the rules with Spark's own analyzer
(``appliance.rules.rule_book.compile_rules``), which has the last word. Each problem is
one line naming the file and the rule id, and every problem is reported, not just the
first.

Sizes are bounded before anything is parsed, so a file can cost at most a known amount of
memory (``MAX_FILE_BYTES`` of YAML, ``MAX_RULES`` rules of at most ``MAX_WHEN_CHARS``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from appliance.rules.rule_types import check as expression_problems

SEVERITIES = ("info", "warning", "critical")  # ascending: position + 1 is the ordinal
#: The example rules shipped as package data (``appliance demo``, loadgen's event mix):
#: in the package's ``examples`` folder, in a checkout and in an installed wheel alike.
EXAMPLE_RULES = Path(__file__).resolve().parents[1] / "examples" / "rules.yml"
RULE_KEYS = ("id", "severity", "when", "message")
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")

#: The largest rules file read (bytes): a 10,000-rule file is about 1 MB.
MAX_FILE_BYTES = 16 * 1024 * 1024
#: The most rules a file may hold (the benchmarks run 10,000).
MAX_RULES = 20_000
#: The longest ``when`` (characters): an IN list of a thousand service names fits.
MAX_WHEN_CHARS = 32_768
#: The longest ``message`` (characters): it is copied into every alert the rule raises.
MAX_MESSAGE_CHARS = 1_024
# libyaml's loader when PyYAML has it (about ten times faster on a large file).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    when: str
    message: str

    @property
    def ordinal(self) -> int:
        """1 = info ... 3 = critical; the pipeline takes the max over matched rules."""
        return SEVERITIES.index(self.severity) + 1


#: Hex digits of the SHA-256 of a rules file's bytes that make its ``rules_version``.
VERSION_DIGITS = 16


def rules_version(content: bytes) -> str:
    """The content hash alerts carry as ``rules_version``: the same bytes, the same
    version, on every host and after every restart."""
    return hashlib.sha256(content).hexdigest()[:VERSION_DIGITS]


@dataclass(frozen=True)
class RuleSet:
    """The rules of one rules file, with that file's content hash (``rules_version``).

    What the query runs and alerts name: a swap replaces one ``RuleSet`` by another.
    """

    rules: tuple[Rule, ...]
    version: str
    source: str = "rules.yml"

    @classmethod
    def of(cls, rules: Iterable[Rule], source: str = "rules") -> RuleSet:
        """Rules built in code (tests, tools): versioned by their canonical YAML."""
        rules = tuple(rules)
        text = yaml.safe_dump({"rules": [
            {"id": r.id, "severity": r.severity, "when": r.when, "message": r.message}
            for r in rules]}, sort_keys=True)
        return cls(rules=rules, version=rules_version(text.encode("utf-8")), source=source)

    def with_rule(self, rule: Rule) -> RuleSet:
        """The same version with one more rule (the warm-up's own rule round)."""
        return RuleSet(rules=(*self.rules, rule), version=self.version, source=self.source)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)


class RulesError(Exception):
    """Every problem found, one line each (file and rule id first)."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


def _rule_problems(entry: Any, index: int, seen: set[str]) -> tuple[Rule | None, list[str]]:
    where = f"rules[{index}]"
    if not isinstance(entry, dict):
        return None, [f"{where}: must be a mapping with id, severity, when"]
    rule_id = entry.get("id")
    if isinstance(rule_id, str) and rule_id:
        where = f"rule {rule_id!r}"
    problems = [f"{where}: {key}: unknown key" for key in entry if key not in RULE_KEYS]
    # Each field's checked value; None while it has a problem.
    valid_id = valid_severity = valid_when = None
    if rule_id is None:
        problems.append(f"{where}: id: missing")
    elif not isinstance(rule_id, str) or not _ID.match(rule_id):
        problems.append(f"{where}: id: must match [a-z0-9][a-z0-9-]* (got {rule_id!r})")
    elif rule_id in seen:
        problems.append(f"{where}: id: duplicate")
    else:
        seen.add(rule_id)
        valid_id = rule_id
    severity = entry.get("severity")
    if isinstance(severity, str) and severity in SEVERITIES:
        valid_severity = severity
    else:
        problems.append(f"{where}: severity: must be one of {', '.join(SEVERITIES)} "
                        f"(got {severity!r})")
    when = entry.get("when")
    if not isinstance(when, str) or not when.strip():
        problems.append(f"{where}: when: missing (a Spark SQL boolean expression)")
    elif len(when) > MAX_WHEN_CHARS:
        problems.append(f"{where}: when: {len(when)} characters; at most {MAX_WHEN_CHARS}")
    else:
        problems += [f"{where}: when: {p}" for p in expression_problems(when)]
        valid_when = when.strip()
    message = entry.get("message", "")
    if not isinstance(message, str):
        problems.append(f"{where}: message: must be a string")
    elif len(message) > MAX_MESSAGE_CHARS:
        problems.append(f"{where}: message: {len(message)} characters; at most "
                        f"{MAX_MESSAGE_CHARS}")
    if problems or valid_id is None or valid_severity is None or valid_when is None:
        return None, problems
    return Rule(id=valid_id, severity=valid_severity, when=valid_when,
                message=message or valid_when), []


def parse_rules(text: str, source: str = "rules.yml") -> list[Rule]:
    """Parse YAML text into rules; raise RulesError listing every problem."""
    if len(text) > MAX_FILE_BYTES:
        raise RulesError([f"{source}: {len(text)} bytes; a rules file holds at most "
                          f"{MAX_FILE_BYTES}"])
    try:
        doc = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader (C or Python)
    except yaml.YAMLError as exc:
        raise RulesError([f"{source}: not valid YAML: {' '.join(str(exc).split())}"]) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rules"), list):
        raise RulesError([f"{source}: rules: must be a list under a top-level 'rules:' key"])
    extra = [k for k in doc if k != "rules"]
    problems = [f"{source}: {k}: unknown key" for k in extra]
    if not doc["rules"]:
        problems.append(f"{source}: rules: must list at least one rule")
    if len(doc["rules"]) > MAX_RULES:
        raise RulesError([*problems, f"{source}: rules: {len(doc['rules'])} rules; at most "
                                     f"{MAX_RULES}"])
    rules: list[Rule] = []
    seen: set[str] = set()
    for index, entry in enumerate(doc["rules"]):
        rule, found = _rule_problems(entry, index, seen)
        problems += [f"{source}: {p}" for p in found]
        if rule is not None:
            rules.append(rule)
    if problems:
        raise RulesError(problems)
    return rules


def parse_rule_set(text: str, source: str = "rules.yml") -> RuleSet:
    """Parse YAML text into versioned rules (the version hashes the UTF-8 text)."""
    return RuleSet(rules=tuple(parse_rules(text, source)),
                   version=rules_version(text.encode("utf-8")), source=source)


def load_rule_set(path: str | Path) -> RuleSet:
    """Read and structurally validate a rules file (no Spark needed), with its version."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise RulesError([f"{path}: {size} bytes; a rules file holds at most "
                              f"{MAX_FILE_BYTES}"])
        content = path.read_bytes()
        text = content.decode("utf-8")
    except FileNotFoundError:
        raise RulesError([f"{path}: file not found"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RulesError([f"{path}: cannot read: {exc}"]) from None
    return RuleSet(rules=tuple(parse_rules(text, str(path))), version=rules_version(content),
                   source=str(path))


def load_rules(path: str | Path) -> list[Rule]:
    """Read and structurally validate a rules file (no Spark needed)."""
    return list(load_rule_set(path).rules)
