"""The docs' pictures are drawn from the text beside them (docs/img/*.dot, ``make docs``),
the committed drawings are current with that text, the deployed topology names every port
the product and the deploy use, and the READMEs show both pictures."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

from support.docs.doc_facts import ports_in_use

ROOT = Path(__file__).resolve().parents[2]
IMG = ROOT / "docs" / "img"
SOURCES = sorted(IMG.glob("*.dot"))
_STAMP = re.compile(r"<!-- drawn by make docs from (\S+), sha256 ([0-9a-f]{64}) -->")


def stale(svg: Path, source: Path) -> str | None:
    """Why ``svg`` is not the drawing of ``source`` as it is now (None: it is)."""
    if not svg.exists():
        return f"{svg.name} missing: run make docs"
    match = _STAMP.search(svg.read_text())
    if match is None:
        return f"{svg.name} carries no source stamp: run make docs"
    if match.group(1) != source.name:
        return f"{svg.name} was drawn from {match.group(1)}, not {source.name}"
    if match.group(2) != hashlib.sha256(source.read_bytes()).hexdigest():
        return f"{svg.name} is older than {source.name}: run make docs"
    return None


def test_every_picture_is_drawn_from_its_current_source():
    assert {s.stem for s in SOURCES} == {"dataflow", "topology", "rule-index"}
    assert [stale(s.with_suffix(".svg"), s) for s in SOURCES] == [None] * len(SOURCES)


def test_a_changed_source_makes_its_picture_stale(tmp_path):
    source = tmp_path / "topology.dot"
    source.write_text((IMG / "topology.dot").read_text())
    svg = tmp_path / "topology.svg"
    svg.write_text((IMG / "topology.svg").read_text())
    assert stale(svg, source) is None
    source.write_text(source.read_text().replace(":9092", ":9094"))
    assert "older than topology.dot" in stale(svg, source)


def test_make_docs_draws_what_is_committed(tmp_path):
    assert shutil.which("dot"), "dot (Debian's graphviz) is missing: make setup installs it"
    for source in SOURCES:
        shutil.copy(source, tmp_path / source.name)
    subprocess.run([sys.executable, str(ROOT / "scripts" / "draw_docs.py"), str(tmp_path)],
                   check=True, timeout=120, capture_output=True)
    for source in SOURCES:
        drawn = tmp_path / source.with_suffix(".svg").name
        assert stale(drawn, tmp_path / source.name) is None
        assert "<svg" in drawn.read_text()


def test_the_topology_names_every_port_in_use():
    ports = ports_in_use()
    assert {9092, 9464, 9465, 9466, 4040, 7077, 8080, 8081, 9090, 9093} <= set(ports)
    drawn = {int(p) for p in re.findall(r":(\d{4,5})\b", (IMG / "topology.dot").read_text())}
    assert {p: why for p, why in ports.items() if p not in drawn} == {}


def test_the_readmes_show_both_pictures():
    for readme, prefix in ((ROOT / "README.md", "docs/img/"),
                           (ROOT / "ansible" / "README.md", "../docs/img/")):
        text = readme.read_text()
        for name in ("dataflow.svg", "topology.svg"):
            assert f"]({prefix}{name})" in text, f"{readme.relative_to(ROOT)}: {name}"
