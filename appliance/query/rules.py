"""Alert rules: load the YAML, and reject every rule the streaming query could not run.

Two passes, because a bad rule must be reported before the query starts and, where
possible, before a JVM starts: ``load_rules`` does the structural checks in pure Python
(YAML shape, ids, severities, and the ``when`` expression parsed with sqlglot's Spark
dialect), and ``analyze_rules`` then resolves each expression with Spark's own analyzer
against the event schema (types, unknown functions, determinism). Each problem is one
line naming the file and the rule id, and every problem is reported, not just the first.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlglot
import yaml
from sqlglot import exp

from appliance.query.events import EVENT_DDL, FIELD_NAMES

SEVERITIES = ("info", "warning", "critical")  # ascending: position + 1 is the ordinal
#: The example rules shipped as package data (``appliance demo``, loadgen's event mix):
#: in the package's ``examples`` folder, in a checkout and in an installed wheel alike.
EXAMPLE_RULES = Path(__file__).resolve().parents[1] / "examples" / "rules.yml"
RULE_KEYS = ("id", "severity", "when", "message")
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")

# Spark functions that read the clock (continuous mode refuses them) or are random.
_CLOCK_FUNCS = {"now", "current_timestamp", "current_date", "curdate", "current_time",
                "localtimestamp", "current_timezone", "unix_timestamp"}
_NONDETERMINISTIC_FUNCS = {"rand", "randn", "random", "uuid", "shuffle", "uniform", "randstr",
                           "monotonically_increasing_id", "spark_partition_id",
                           "input_file_name", "input_file_block_start",
                           "input_file_block_length", "reflect", "java_method",
                           "try_reflect"}
_CLOCK_NODES = (exp.CurrentTimestamp, exp.CurrentDate, exp.CurrentTime)
_RANDOM_NODES = (exp.Rand, exp.Randn, exp.Uuid)
_NON_BOOLEAN_TOPS = (exp.Literal, exp.Column, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod,
                     exp.Neg, exp.DPipe, exp.Array, exp.Struct, exp.Map)


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


def _function_name(node: exp.Expr) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return ""


def expression_problems(when: str) -> list[str]:
    """Structural problems of one ``when`` expression, found without Spark."""
    try:
        statements = [s for s in sqlglot.parse(when, read="spark") if s is not None]
    except sqlglot.errors.SqlglotError as exc:
        return [f"does not parse: {str(exc).splitlines()[0]}"]
    if len(statements) != 1:
        return ["must be exactly one expression"]
    tree = statements[0]
    if isinstance(tree, (exp.Query, exp.Command, exp.DDL, exp.DML)) or not isinstance(
            tree, exp.Expression):
        return ["must be a boolean expression, not a statement"]
    problems: list[str] = []
    lambda_params = {p.name.lower() for lam in tree.find_all(exp.Lambda)
                     for p in lam.expressions}
    for node in tree.walk():
        name = _function_name(node)
        if isinstance(node, (exp.Subquery, exp.Query)) or (
                isinstance(node, exp.Exists) and isinstance(node.this, exp.Query)):
            problems.append("subqueries are not allowed")
        elif isinstance(node, exp.Window):
            problems.append("window functions are not allowed")
        elif isinstance(node, exp.AggFunc) and not node.find_ancestor(exp.Window):
            problems.append(f"aggregate functions are not allowed ({name})")
        elif isinstance(node, _CLOCK_NODES) or name in _CLOCK_FUNCS:
            problems.append(f"current-time functions are not allowed ({name})")
        elif isinstance(node, _RANDOM_NODES) or name in _NONDETERMINISTIC_FUNCS:
            problems.append(f"must be deterministic ({name} is not)")
        elif isinstance(node, exp.Column):
            field = (node.table or node.name).lower()
            if field not in FIELD_NAMES and field not in lambda_params:
                problems.append(f"unknown field {field!r} (event fields: "
                                f"{', '.join(FIELD_NAMES)})")
    if isinstance(tree, _NON_BOOLEAN_TOPS) and not (
            isinstance(tree, exp.Literal) and tree.this.lower() in ("true", "false")):
        problems.append("must be a boolean expression")
    return list(dict.fromkeys(problems))


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
    else:
        problems += [f"{where}: when: {p}" for p in expression_problems(when)]
        valid_when = when.strip()
    message = entry.get("message", "")
    if not isinstance(message, str):
        problems.append(f"{where}: message: must be a string")
    if problems or valid_id is None or valid_severity is None or valid_when is None:
        return None, problems
    return Rule(id=valid_id, severity=valid_severity, when=valid_when,
                message=message or valid_when), []


def parse_rules(text: str, source: str = "rules.yml") -> list[Rule]:
    """Parse YAML text into rules; raise RulesError listing every problem."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RulesError([f"{source}: not valid YAML: {' '.join(str(exc).split())}"]) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rules"), list):
        raise RulesError([f"{source}: rules: must be a list under a top-level 'rules:' key"])
    extra = [k for k in doc if k != "rules"]
    problems = [f"{source}: {k}: unknown key" for k in extra]
    if not doc["rules"]:
        problems.append(f"{source}: rules: must list at least one rule")
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


def _spark_problem(spark: Any, events: Any, when: str) -> str | None:
    """Resolve ``when`` against ``events`` (an empty frame of the event schema) with
    Spark's analyzer; None if fine."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType

    try:
        df = events.select(F.expr(when).alias("matched"))
        data_type = df.schema["matched"].dataType
        analyzed = df._jdf.queryExecution().analyzed()
    except Exception as exc:  # PySparkException, or a py4j error carrying Spark's message
        return _first_line(str(exc))
    if analyzed.getClass().getSimpleName() != "Project" or not analyzed.child().children(
    ).isEmpty():
        return "aggregate and window functions are not allowed"
    expression = analyzed.projectList().head()
    jvm = spark.sparkContext._jvm
    if jvm.org.apache.spark.sql.catalyst.expressions.SubqueryExpression.hasSubquery(expression):
        return "subqueries are not allowed"
    if re.search(r"\b(" + "|".join(sorted(_CLOCK_FUNCS)) + r")\(", expression.sql().lower()):
        return "current-time functions are not allowed"
    if not expression.deterministic():
        return "must be deterministic"
    if not isinstance(data_type, BooleanType):
        return f"must be a boolean expression (it is {data_type.simpleString()})"
    return None


def _first_line(message: str) -> str:
    line = next((ln for ln in message.splitlines() if ln.strip()), message)
    return " ".join(line.split()).split(" SQLSTATE:")[0]


def analyze_rules(spark: Any, rules: Iterable[Rule], source: str = "rules.yml") -> None:
    """Second pass with Spark's analyzer; raise RulesError listing every problem."""
    problems = []
    # pyspark logs every analysis error at ERROR with a stack trace; here they are expected.
    quiet = logging.getLogger("SQLQueryContextLogger")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        events = spark.createDataFrame([], EVENT_DDL)
        found = [(rule, _spark_problem(spark, events, rule.when)) for rule in rules]
    finally:
        quiet.setLevel(level)
    for rule, problem in found:
        if problem:
            problems.append(f"{source}: rule {rule.id!r}: when: {problem}")
    if problems:
        raise RulesError(problems)
