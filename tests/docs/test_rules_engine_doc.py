"""docs/rules-engine.md names every class of the Java rule engine, and only those.

The page's class table (under "## The classes") is the rule engine's layout: a class
added to ``io.appliance.rules`` without a row, or a row left behind by a class renamed
or removed, fails here. Read from the sources themselves: each top-level class is one
``.java`` file. docs/architecture.md, the Python room's layout, links the page.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "rules-engine.md"
PACKAGE = ROOT / "connector" / "src" / "main" / "java" / "io" / "appliance" / "rules"
_CELL_NAME = re.compile(r"`([A-Z]\w*)`")


def table_classes(text: str, heading: str = "## The classes") -> list[str]:
    """The class names in the first column of the table under ``heading``, in order."""
    lines = text.split(heading, 1)[1].splitlines()
    names: list[str] = []
    in_table = False
    for line in lines:
        if line.startswith("## "):
            break
        if not line.startswith("|"):
            if in_table:
                break
            continue
        in_table = True
        first = line.strip().strip("|").split("|", 1)[0]
        names += _CELL_NAME.findall(first)
    return names


def test_every_class_of_the_package_has_one_row_and_no_row_names_a_stranger():
    named = table_classes(DOC.read_text())
    sources = sorted(p.stem for p in PACKAGE.glob("*.java"))
    assert sources, f"no Java sources in {PACKAGE}"
    assert sorted(set(named)) == sources, (
        f"missing: {sorted(set(sources) - set(named))}, "
        f"not in the package: {sorted(set(named) - set(sources))}")
    assert len(named) == len(set(named)), f"named twice: {named}"


def test_the_architecture_page_links_the_rule_engine():
    assert "(rules-engine.md)" in (ROOT / "docs" / "architecture.md").read_text()


def test_a_class_missing_from_the_table_is_seen():
    """The check itself: a row dropped from the page is missed."""
    text = DOC.read_text()
    without = "\n".join(ln for ln in text.splitlines() if not ln.startswith("| `TaskRules`"))
    assert "TaskRules" in table_classes(text)
    assert "TaskRules" not in table_classes(without)
