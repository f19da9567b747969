"""Facts the docs' tests check the docs against, read from the code and the deploy (never
written down again here): the ports in use, the metric names the code exports, the
command-line flags each of the project's commands takes."""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import yaml

from appliance.broker.settings import BrokerConfig
from appliance.cli import build_parser as appliance_parser
from appliance.command_tree import walk
from appliance.config import EMBEDDED_PORT, Config
from loadgen.cli import build_parser as loadgen_parser

ROOT = Path(__file__).resolve().parents[3]
SCRAPE_CONFIG = ROOT / "dashboards" / "prometheus" / "prometheus.yml"
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def scrape_ports() -> dict[str, int]:
    """job name -> the port the project's Prometheus scrape config expects it on."""
    jobs = yaml.safe_load(SCRAPE_CONFIG.read_text())["scrape_configs"]
    return {job["job_name"]: int(job["static_configs"][0]["targets"][0].rsplit(":", 1)[1])
            for job in jobs}


def ports_in_use() -> dict[int, str]:
    """Every port the product listens on by default and the deploy configures, and why."""
    ports = {EMBEDDED_PORT: "the embedded broker", BrokerConfig().port: "appliance broker",
             Config().metrics.port: "[metrics] port"}
    for job in yaml.safe_load(SCRAPE_CONFIG.read_text())["scrape_configs"]:
        for target in job["static_configs"][0]["targets"]:
            ports.setdefault(int(target.rsplit(":", 1)[1]), f"the {job['job_name']} scrape job")
    # The site's settings are role defaults an inventory overrides (ansible/README.md).
    deploy = sorted((ROOT / "ansible" / "roles").glob("*/defaults/main.yml"))
    for path in deploy:
        for key, value in (yaml.safe_load(path.read_text()) or {}).items():
            if key.endswith("_port") and isinstance(value, int):
                ports.setdefault(value, f"{key} ({path.relative_to(ROOT)})")
    return ports


@cache
def exported_metrics() -> frozenset[str]:
    """The metric family names the appliance, its broker and the load generator export:
    every string constant of theirs that is such a name."""
    name = re.compile(r"^(appliance|broker|loadgen)_[a-z0-9_]+$")
    found = set()
    for package in ("appliance", "loadgen"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                        and name.match(node.value):
                    found.add(node.value)
    return frozenset(found)


def _flags(root: str, parser: argparse.ArgumentParser) -> dict[tuple[str, ...], frozenset[str]]:
    """Every parser of the command tree (its lazy subcommands built) with its flags."""
    return {(root, *path): frozenset(o for a in sub._actions for o in a.option_strings)
            for path, sub in walk(parser)}


@cache
def cli_flags() -> dict[tuple[str, ...], frozenset[str]]:
    """(command, subcommand, ...) -> the flags that parser takes, read from the argparse
    parsers themselves (so a renamed flag, or its kept alias, is what the docs must say)."""
    return {**_flags("appliance", appliance_parser()), **_flags("loadgen", loadgen_parser()),
            ("locust",): _locust_flags()}


def _locust_flags() -> frozenset[str]:
    """Locust's own flags and the ones loadgen/locustfile.py adds (in a child: importing
    Locust patches the interpreter with gevent)."""
    code = ("import json\nfrom locust import argument_parser, events\nimport loadgen.locustfile\n"
            "p = argument_parser.get_parser()\nevents.init_command_line_parser.fire(parser=p)\n"
            "print(json.dumps([o for a in p._actions for o in a.option_strings]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, check=True)
    return frozenset(json.loads(done.stdout.strip().splitlines()[-1]))


@cache
def module_flags(module: str) -> frozenset[str]:
    """The flags of ``python -m MODULE`` (a bench or dashboards command), from its help;
    none for a module that has no options (``--help`` is then refused, exit 2)."""
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.returncode in (0, 2), f"python -m {module} --help: {done.stderr[-500:]}"
    return frozenset(_FLAG.findall(done.stdout)) if done.returncode == 0 else frozenset()
