"""ansible-lint (production profile, strict) finds nothing in ansible/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ANSIBLE_DIR = Path(__file__).resolve().parents[2] / "ansible"


def test_ansible_lint_production_profile_is_clean():
    lint = Path(sys.executable).parent / "ansible-lint"
    proc = subprocess.run([str(lint), "--profile", "production", "--strict", "--nocolor"],
                          cwd=ANSIBLE_DIR, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
