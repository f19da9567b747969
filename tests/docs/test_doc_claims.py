"""What the user docs (docs/*.md, README.md) name is what the code has: every port, every
metric name, every command-line flag.

Flags are read from the commands' own argparse parsers (``appliance``, ``loadgen``, the
Locust file's, and ``python -m <module> --help`` for the bench and dashboards commands), so
a renamed flag fails here until the docs follow it, and a kept alias still passes. A flag
after one of those commands must belong to that command (its subcommand, or the one it
hangs under); a flag named on its own must belong to some command of the project, or be
one of the few other tools' flags listed below. Ports must be in use by the product or the
deploy (or be another product's listed below), and a ``--metrics-port`` must be the one the
project's Prometheus scrape config expects of that command. Metric names must be exported
by the code (a counter's ``_total``, a histogram's ``_bucket``/``_count``/``_sum``
included). The quickstart test already runs the README's shell blocks; this one reads
every page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from support.docs.doc_facts import (
    ROOT,
    cli_flags,
    exported_metrics,
    module_flags,
    ports_in_use,
    scrape_ports,
)

DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]

#: Other tools whose command lines the docs show; their flags are theirs to check.
OTHER_TOOLS = frozenset({
    "ansible-playbook", "ansible-lint", "ansible-vault", "curl", "git", "java", "javac",
    "jar", "journalctl", "kcat", "kafka-acls.sh", "kafka-configs.sh",
    "kafka-console-consumer.sh", "kafka-consumer-groups.sh", "kafka-topics.sh", "make",
    "pip", "promtool", "pytest", "ss", "systemctl", "taskset", "timeout", "sudo", "openssl",
    "spark-submit", "apt-get", "cp", "cat", "grep", "ls", "chmod", "ssh", "watch", "cd",
})
#: Flags of other tools the docs name on their own, in prose.
OTHER_FLAGS = {
    "--tags": "ansible-playbook", "--skip-tags": "ansible-playbook",
    "--check": "ansible-playbook / python -m dashboards.build",
    "--diff": "ansible-playbook", "--limit": "ansible-playbook",
    "--release": "javac", "--bootstrap-server": "Kafka's own tools",
    "--from-beginning": "kafka-console-consumer.sh", "--group": "Kafka's own tools",
}
#: Ports of other products the docs name.
OTHER_PORTS = {8089: "Locust's web UI", 3000: "Grafana's default", 0: "any free port"}
#: Which scrape job's port a command's ``--metrics-port`` must be.
METRICS_JOB = {("appliance", "broker"): "broker", ("loadgen", "run"): "loadgen",
               ("loadgen", "floor"): "loadgen"}
#: Modules whose ``python -m`` is one of the project's commands.
MODULE_COMMANDS = {"appliance": "appliance", "loadgen": "loadgen",
                   "appliance.broker.users_cli": "appliance"}
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
_ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")
_PORT = re.compile(r"(?:\b[\w.-]*[a-z0-9]:|\bports? (?:= )?|--[\w-]*port[ =])(\d{2,5})\b")
_METRIC = re.compile(r"(?<![\w.\-/])(?:appliance|broker|loadgen)_[a-z0-9_]+")
_SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


@dataclass(frozen=True)
class Span:
    """A piece of a page that is code: a line of a code block, or an inline code span."""

    doc: str
    line: int
    text: str


def spans(path: Path) -> list[Span]:
    out, fenced, pending, first = [], False, "", 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            code = re.sub(r"(^|\s)#\s.*$", "", line)  # a shell comment
            first = first or number  # a command continued over lines: its first line
            if code.rstrip().endswith("\\"):
                pending += code.rstrip()[:-1] + " "
                continue
            out.append(Span(path.name, first, pending + code))
            pending, first = "", 0
        else:
            out += [Span(path.name, number, s) for s in re.findall(r"`([^`]+)`", line)]
    return out


def _segments(text: str) -> list[list[str]]:
    """A span's commands, each as tokens: ``&&``, ``;`` and a pipe separate them, not the
    ``|`` between a synopsis' alternatives inside brackets; the brackets dropped."""
    parts, depth, start = [], 0, 0
    for at, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth <= 0 and (char in ";|" or text.startswith("&&", at)):
            parts.append(text[start:at])
            start = at + 1
    parts.append(text[start:])
    return [part.replace("[", " ").replace("]", " ").replace("&", " ").split()
            for part in parts if part.strip(" &")]


def _command(tokens: list[str]) -> tuple[tuple[str, ...] | str | None, list[str]]:
    """(the project's command path, or ``"-m MODULE"``, or ``"other"``, or None for a
    bare flag; the tokens after the command)."""
    i = 0
    while i < len(tokens) and (_ENV.match(tokens[i]) or tokens[i] in ("$", "exec", "nohup")):
        i += 1
    if i >= len(tokens):
        return None, []
    base = tokens[i].rsplit("/", 1)[-1]
    if base.startswith("python") and tokens[i + 1:i + 2] == ["-m"] and len(tokens) > i + 2:
        module, rest = tokens[i + 2], tokens[i + 3:]
        if module in MODULE_COMMANDS:
            base, i = MODULE_COMMANDS[module], i + 2
        else:
            return f"-m {module}", rest
    if base in ("appliance", "loadgen", "locust"):
        path = (base,)
        rest = tokens[i + 1:]
        while rest and (*path, rest[0]) in cli_flags():
            path, rest = (*path, rest[0]), rest[1:]
        return path, rest
    if base in OTHER_TOOLS or not base.startswith("-"):
        return "other", []
    return None, tokens[i:]


def _known_anywhere() -> frozenset[str]:
    """Every flag of the project's commands, including the ``python -m`` ones any page
    runs, and the other tools' flags listed above."""
    modules = {m for doc in DOCS for m in re.findall(r"python -m ([a-z_][\w.]*)",
                                                    doc.read_text())
               if m not in MODULE_COMMANDS}
    return frozenset().union(*cli_flags().values(), OTHER_FLAGS,
                             *(module_flags(m) for m in sorted(modules)))


def flag_problems(found: list[Span]) -> list[str]:
    problems = []
    anywhere = _known_anywhere()
    for span in found:
        for tokens in _segments(span.text):
            command, rest = _command(tokens)
            flags = _FLAG.findall(" ".join(rest))
            where = f"{span.doc}:{span.line}"
            if isinstance(command, tuple):
                # the command and the ones it hangs under; a command named without its
                # subcommand ("`loadgen --bootstrap`") stands for all of them
                known = frozenset().union(*(
                    flags_of for path, flags_of in cli_flags().items()
                    if command[:len(path)] == path
                    or (len(command) == 1 and path[:1] == command)))
                problems += [f"{where}: `{' '.join(command)}` takes no {flag}"
                             for flag in flags if flag not in known]
                job = METRICS_JOB.get(command)
                for value in re.findall(r"--metrics-port[ =](\d+)", " ".join(rest)):
                    if job and int(value) not in (0, scrape_ports()[job]):
                        problems.append(f"{where}: `{' '.join(command)} --metrics-port "
                                        f"{value}`, but Prometheus scrapes the {job} job on "
                                        f"{scrape_ports()[job]}")
            elif isinstance(command, str) and command.startswith("-m "):
                module = command[3:]
                problems += [f"{where}: `python -m {module}` takes no {flag}"
                             for flag in flags if flag not in module_flags(module)]
            elif command is None:
                problems += [f"{where}: no command of the project takes {flag}"
                             for flag in flags if flag not in anywhere]
    return problems


def port_problems(path: Path) -> list[str]:
    allowed = {**ports_in_use(), **OTHER_PORTS}
    return [f"{path.name}:{number}: port {port} is used by nothing here"
            for number, line in enumerate(path.read_text().splitlines(), 1)
            for port in map(int, _PORT.findall(line)) if port not in allowed]


def _not_metrics() -> frozenset[str]:
    """Names shaped like metrics that are something else: the project's modules and the
    deploy's variables."""
    stems = {p.stem for package in ("appliance", "loadgen", "bench", "dashboards")
             for p in (ROOT / package).rglob("*.py")}
    variables = set()
    for path in (ROOT / "ansible").rglob("*.yml"):
        variables |= set(re.findall(r"^\s*([a-z][a-z0-9_]*):", path.read_text(), re.M))
    return frozenset(stems | variables)


def metric_problems(path: Path) -> list[str]:
    exported, other = exported_metrics(), _not_metrics()

    def known(name: str) -> bool:
        return name in exported or name in other or any(
            name.endswith(s) and name[:-len(s)] in exported for s in _SUFFIXES)

    return [f"{path.name}:{number}: {name} is not a metric the code exports"
            for number, line in enumerate(path.read_text().splitlines(), 1)
            for name in _METRIC.findall(line) if not known(name)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_flag_the_page_names_is_one_its_command_takes(doc):
    assert flag_problems(spans(doc)) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_port_the_page_names_is_in_use(doc):
    assert port_problems(doc) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_metric_the_page_names_is_exported(doc):
    assert metric_problems(doc) == []


def test_the_checks_find_a_wrong_flag_port_and_metric(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("\n".join([
        "```sh",
        "appliance run --config a.toml --no-such-flag",
        "loadgen run --bootstrap 127.0.0.1:9092 --rate 10 \\",
        "    [--floor-seconds 2 | --floor-ms 1.2] [--metrics-port 9465]",
        "python -m dashboards.build --check --nope",
        "```",
        "Pass `--made-up` to it; scrape 127.0.0.1:9999 for `appliance_made_up_total`.",
        "`appliance broker --metrics-port 9465` and `loadgen_events_sent_total` are right.",
    ]) + "\n")
    assert flag_problems(spans(page)) == [
        "page.md:2: `appliance run` takes no --no-such-flag",
        "page.md:3: `loadgen run --metrics-port 9465`, but Prometheus scrapes the loadgen "
        f"job on {scrape_ports()['loadgen']}",
        "page.md:5: `python -m dashboards.build` takes no --nope",
        "page.md:7: no command of the project takes --made-up"]
    assert port_problems(page) == ["page.md:7: port 9999 is used by nothing here"]
    assert metric_problems(page) == [
        "page.md:7: appliance_made_up_total is not a metric the code exports"]


def test_the_scrape_config_names_the_metrics_ports_the_tables_above_use():
    jobs = yaml.safe_load((ROOT / "dashboards" / "prometheus" / "prometheus.yml").read_text())
    names = {job["job_name"] for job in jobs["scrape_configs"]}
    assert set(METRICS_JOB.values()) <= names
