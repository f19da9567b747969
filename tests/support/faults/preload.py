"""Build a test's LD_PRELOAD library from its C source with gcc (scripts/system_deps.py
installs gcc)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def build_library(source: Path, out_dir: Path) -> Path:
    gcc = shutil.which("gcc")
    assert gcc, "gcc is required (scripts/system_deps.py installs it)"
    lib = out_dir / (source.stem + ".so")
    subprocess.run([gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror",
                    "-o", str(lib), str(source), "-ldl", "-lpthread"],
                   check=True, timeout=120)
    return lib
