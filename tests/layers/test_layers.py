"""The import-layer contracts (pyproject.toml ``[tool.importlinter]``) hold, and would fail.

``make lint`` runs ``lint-imports`` on the tree; this test runs it too (so CI's ``make
test`` keeps the layering), and then on a copy of the tree with one upward import added
at the bottom of each contract, to prove each contract can actually fail.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("appliance", "loadgen", "bench", "dashboards")


def _lint(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT), "--config", str(tree / "pyproject.toml"),
                           "--no-cache"], cwd=tree, env={"PYTHONPATH": str(tree),
                                                         "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)


def _copy_tree(dest: Path) -> Path:
    for name in PACKAGES:
        shutil.copytree(ROOT / name, dest / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.jar"))
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def test_the_tree_keeps_every_contract():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize("module,upward,contract", [
    ("appliance/config.py", "import loadgen.run", "the load generator above the appliance"),
    ("appliance/broker/wire/records.py", "import appliance.rules.rules_file",
     "inside the appliance"),
    ("appliance/broker/wire/codec.py", "import appliance.broker.wire.codegen",
     "inside the broker's wire"),
    ("appliance/broker/caller.py", "import appliance.broker.groups.coordinator",
     "inside the broker:"),
    ("appliance/broker/storage/durable_io.py", "import appliance.broker.storage.segments",
     "inside the broker's storage"),
    ("appliance/broker/groups/offsets.py", "import appliance.broker.groups.apis",
     "inside the broker's groups"),
    ("appliance/broker/acl/model.py", "import appliance.broker.acl.authorizer",
     "inside the broker's ACLs"),
    ("appliance/broker/security/scram.py", "import appliance.broker.security.sasl",
     "inside the broker's security"),
    ("appliance/broker/connections/cap.py", "import appliance.broker.connections.rate",
     "inside the broker's connections"),
    ("appliance/query/alert_headers.py", "import appliance.query.pipeline",
     "inside the query"),
    ("appliance/rules/rule_book.py", "import appliance.query.pipeline",
     "inside the appliance"),
    ("appliance/events.py", "import appliance.rules.rule_types", "inside the appliance"),
    ("appliance/rules/sql_types.py", "import appliance.rules.rule_types",
     "inside the rules"),
    ("appliance/query/pipeline.py", "import appliance.observability.metrics",
     "inside the appliance"),
    ("appliance/process/class_archive.py", "import appliance.process.runner",
     "inside the process layer"),
])
def test_an_upward_import_breaks_its_contract(tmp_path, module, upward, contract):
    tree = _copy_tree(tmp_path)
    target = tree / module
    target.write_text(target.read_text() + f"\n{upward}  # deliberate violation\n")
    result = _lint(tree)
    assert result.returncode != 0, result.stdout
    broken = [ln for ln in result.stdout.splitlines() if ln.endswith("BROKEN")]
    assert any(contract in ln for ln in broken), result.stdout


def test_a_new_module_must_be_placed_in_a_layer(tmp_path):
    """The contracts are exhaustive: a module nobody placed fails instead of escaping."""
    tree = _copy_tree(tmp_path)
    (tree / "appliance" / "unplaced.py").write_text('"""Not in any layer."""\n')
    result = _lint(tree)
    assert result.returncode != 0 and "appliance.unplaced" in result.stdout, result.stdout
