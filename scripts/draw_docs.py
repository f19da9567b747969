"""Draw the docs' pictures from the text kept beside them (``make docs``).

Every ``docs/img/*.dot`` becomes the ``.svg`` of the same name, drawn by Graphviz's ``dot``
(Debian's ``graphviz``, which ``make setup`` installs). Each SVG carries the SHA-256 of
the source it was drawn from, so a test can tell a picture that no longer matches its
text without drawing it again (another Graphviz version draws other bytes).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

IMG = Path(__file__).resolve().parents[1] / "docs" / "img"


def stamp(source: Path) -> str:
    """The comment an SVG drawn from ``source`` carries (tests/docs/test_pictures.py)."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    return f"<!-- drawn by make docs from {source.name}, sha256 {digest} -->"


def draw(source: Path) -> Path:
    svg = subprocess.run(["dot", "-Tsvg", str(source)], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    head, sep, body = svg.partition("?>\n")  # after the XML declaration, if any
    drawn = f"{head}{sep}{stamp(source)}\n{body}" if sep else f"{stamp(source)}\n{svg}"
    target = source.with_suffix(".svg")
    target.write_text(drawn)
    return target


def main(argv: list[str]) -> int:
    """``draw_docs.py [DIR]``: every ``*.dot`` in DIR (default: docs/img)."""
    if shutil.which("dot") is None:
        print("docs: dot not found: install Debian's graphviz (make setup does)",
              file=sys.stderr)
        return 1
    for source in sorted((Path(argv[0]) if argv else IMG).glob("*.dot")):
        print(f"docs: drew {draw(source)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
