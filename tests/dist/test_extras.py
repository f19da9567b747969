"""A lean install: ``pip install appliance`` brings what ``appliance run`` and the broker
need, the tools come as extras (pyproject.toml, held here to ``appliance.extras``), the
appliance package imports none of an extra's modules, and a command whose extra is
missing says so in one line and exits 2. (tests/dist/test_wheel.py installs the real
wheel without extras and runs the broker and the appliance from it.)"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from appliance.extras import EXTRAS, TOOLS

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[=<>!~\[ ;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_pyproject_extras_are_the_table_and_tools_is_all_of_them():
    optional = PROJECT["optional-dependencies"]
    for name, extra in EXTRAS.items():
        assert _names(optional[name]) == set(extra.modules.values()), name
    assert optional[TOOLS] == [f"appliance[{','.join(EXTRAS)}]"]
    assert "appliance[tools]" in optional["dev"]
    runtime = _names(PROJECT["dependencies"])
    for extra in EXTRAS.values():
        assert not runtime & set(extra.modules.values()), extra.name
    assert PROJECT["license"] == "Apache-2.0" and (ROOT / "LICENSE").is_file()
    assert "Apache License" in (ROOT / "LICENSE").read_text()[:200]


def test_the_appliance_package_imports_no_module_of_an_extra():
    extra_modules = {m for extra in EXTRAS.values() for m in extra.modules}
    found = []
    for path in sorted((ROOT / "appliance").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [(path.relative_to(ROOT), n) for n in names
                      if n.split(".")[0] in extra_modules]
    assert found == []


@pytest.mark.parametrize("module, args, line", [
    ("loadgen.cli", ["run", "--bootstrap-server", "k:1", "--rate", "1", "--duration", "1"],
     "loadgen run: needs the loadgen extra (confluent-kafka, hdrhistogram not installed): "
     "pip install 'appliance[loadgen]'"),
    ("appliance.cli", ["demo", "--duration", "1s"],
     "appliance demo: needs the loadgen extra (confluent-kafka, hdrhistogram not "
     "installed): pip install 'appliance[loadgen]'"),
    ("appliance.cli", ["dashboards", "render", "--prometheus", "http://127.0.0.1:1",
                       "--out", "x"],
     "appliance dashboards: needs the dashboards extra (grafana-client not installed): "
     "pip install 'appliance[dashboards]'"),
])
def test_a_missing_extra_is_one_line_and_exit_2(module, args, line):
    # sys.modules[name] = None: neither importable nor found, as when not installed.
    code = ("import sys\nfor name in ('confluent_kafka', 'hdrh', 'grafana_client'):\n"
            "    sys.modules[name] = None\n"
            f"from {module} import main\nsys.exit(main({args!r}))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, env={**env, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [line]
