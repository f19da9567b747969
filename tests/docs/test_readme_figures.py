"""The README cannot overstate: every measured figure it gives cites the section of the
docs where the measurement is written up (how, where, when), and that section has the same
figure; its config snippet is the example file's settings, value for value.

A measured figure is written ``... ([measured](docs/FILE.md#anchor)) ...`` in prose, or
``(measured: docs/FILE.md#anchor)`` in a code block's comment: every figure (a number with
a unit: ``1.5 s``, ``577 MiB``) of that paragraph or line must be in the cited section,
rounded as the README rounds it. A paragraph that says "measured", or gives a figure as
approximate ("~1.5 s", "about 2 min"), must cite.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
EXAMPLE = ROOT / "examples" / "appliance.toml"
CITE = re.compile(r"\[measured\]\((docs/[^)#\s]+)#([a-z0-9-]+)\)"
                  r"|measured: (docs/[^#\s]+)#([a-z0-9-]+)")
FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?) ?(ms|s|MiB|MB|GiB|GB|min)\b")
#: "~1.5 s", "about 2 min": a figure someone measured, however roughly.
APPROXIMATE = re.compile(r"(?:~|\babout )\d[\d,.]* ?(?:ms|s|min|MiB|MB|GiB|GB)\b")
HEADING = re.compile(r"^(#+) (.*)$", re.M)
TOML_BLOCK = re.compile(r"```toml\n(.*?)```", re.S)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _section(doc: Path, anchor: str) -> str:
    """The text under the heading whose anchor is ``anchor``, to the next heading of the
    same or a higher level."""
    text = doc.read_text(encoding="utf-8")
    headings = list(HEADING.finditer(text))
    for i, found in enumerate(headings):
        if _slug(found.group(2)) == anchor:
            level = len(found.group(1))
            end = next((h.start() for h in headings[i + 1:] if len(h.group(1)) <= level),
                       len(text))
            return text[found.end():end]
    raise AssertionError(f"{doc.relative_to(ROOT)}: no heading with the anchor #{anchor}")


def _units(text: str) -> list[str]:
    """Paragraphs of prose, and each line of a code block on its own."""
    out: list[str] = []
    for i, part in enumerate(re.split(r"^```.*$", text, flags=re.M)):
        if i % 2:
            out += part.splitlines()
        else:
            out += re.split(r"\n\s*\n", part)
    return [unit for unit in out if unit.strip()]


def _value(number: str) -> float:
    return float(number.replace(",", ""))


def _decimals(number: str) -> int:
    return len(number.partition(".")[2])


def _has(section: str, number: str, unit: str) -> bool:
    """The section gives ``number unit``, as written or to more digits."""
    wanted = _value(number)
    for found, found_unit in FIGURE.findall(section):
        if found_unit == unit and round(_value(found), _decimals(number)) == wanted:
            return True
    return False


def problems_of(text: str) -> list[str]:
    """Every measured claim of ``text`` (README-like) that its cited section lacks, and
    every paragraph that says "measured" without citing."""
    out = []
    for unit in _units(text):
        cites = CITE.findall(unit)
        if not cites:
            if re.search(r"\bmeasured\b", unit, re.I):
                out.append(f"says measured, cites nothing: {unit.strip()[:80]!r}")
            for about in APPROXIMATE.findall(unit):
                out.append(f"{about.strip()!r}: a measured figure that cites nothing")
            continue
        sections = [_section(ROOT / (a or c), b or d) for a, b, c, d in cites]
        for number, unit_name in FIGURE.findall(CITE.sub("", unit)):
            if not any(_has(section, number, unit_name) for section in sections):
                out.append(f"{number} {unit_name}: not in the cited section(s) "
                           f"{[(a or c) + '#' + (b or d) for a, b, c, d in cites]}")
    return out


def test_every_measured_figure_of_the_readme_is_in_the_section_it_cites():
    assert problems_of(README.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("claim", [
    "appliance rules check FILE   # no JVM: ~1.5 s for 10,000 rules",  # the README's, before
    "appliance rules check FILE   # no JVM: 1.5 s for 10,000 rules (measured)",  # no source
    "It takes 0.9 s ([measured](docs/appliance.md#rules-at-scale-measured)).",  # not there
])
def test_the_check_finds_an_unsourced_or_wrong_figure(claim):
    assert problems_of(claim) != []


def _settings(text: str) -> dict[tuple[str, str], object]:
    return {(section, key): value for section, values in tomllib.loads(text).items()
            for key, value in values.items()}


def test_the_readmes_config_snippet_is_the_example_files_settings():
    """The README's TOML says it is examples/appliance.toml in short: every key it sets has
    the example's value (the checkpoint_dir used to differ)."""
    [snippet] = [block for block in TOML_BLOCK.findall(README.read_text(encoding="utf-8"))
                 if block.startswith("# examples/appliance.toml")]
    example = _settings(EXAMPLE.read_text(encoding="utf-8"))
    differ = {key: (value, example.get(key, "(not set)"))
              for key, value in _settings(snippet).items() if example.get(key) != value}
    assert differ == {}
