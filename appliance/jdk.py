"""Which ``java`` the appliance's Spark runs, and its version, without starting a JVM.

Spark's launcher (pyspark's ``bin/spark-class``) runs ``$JAVA_HOME/bin/java``, else the
``java`` on PATH; the class-data-sharing archive is keyed by that binary and ``appliance
--version`` reports it. A JDK's version is in the ``release`` file at its home (every
OpenJDK build writes it), so reading it costs a file read, where ``java -version`` starts
a JVM (40-130 ms measured on a busy 2-core machine): ``appliance --version --verbose``
runs that too, for the vendor's full line.

Standard library only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

_RELEASE_VERSION = re.compile(r'^JAVA_VERSION="([^"]+)"', re.M)


def java_binary() -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def release_version(java: Path) -> str | None:
    """``JAVA_VERSION`` of the JDK ``java`` belongs to (its ``release`` file), or None."""
    try:
        text = (java.resolve().parent.parent / "release").read_text(encoding="utf-8")
    except OSError:
        return None
    match = _RELEASE_VERSION.search(text)
    return match.group(1) if match else None


def version_lines(java: Path, timeout_s: float = 30.0) -> list[str]:
    """What ``java -version`` prints (it starts a JVM)."""
    try:
        done = subprocess.run([str(java), "-version"], capture_output=True, text=True,
                              timeout=timeout_s)
    except (OSError, subprocess.SubprocessError) as exc:
        return [f"(java -version failed: {exc})"]
    return [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
