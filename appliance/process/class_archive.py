"""Where the driver JVM's class-data-sharing (CDS) archive lives, and the JVM option that
uses it.

Most of a fresh driver JVM's first seconds go to loading and verifying Spark's classes out
of ~250 jars (a JFR recording of a start showed ``ZipFile`` lookups as the top frame for
the whole startup). A dynamic CDS archive (JDK 13+) holds those classes already parsed and
verified, written by one run with ``-XX:ArchiveClassesAtExit`` and mapped by every later
JVM with ``-XX:SharedArchiveFile``. ``appliance class-archive build`` writes it
(``appliance.process.class_archive_build``); ``make setup`` runs that once.

An archive belongs to one JDK, one Spark installation and one build of the appliance's own
jars (the connector and kafka-clients, on the driver's class path): its name carries a key
of the ``java`` that ``spark-submit`` runs, the pyspark install and its version, and each
of those jars' size and time, so upgrading any of them picks a new name. The JVM compares
the class path's jars with the archive's and, on a mismatch, does not map the archive at
all (a warning on its stderr), never with stale classes: a key without the jars kept a
rebuilt connector on an archive every run then refused, and ``build --if-missing`` saw
the old file and built none. What the JVM does
not survive is a damaged file: a truncated archive aborts every JVM that maps it (seen
with JDK 17 at every truncation point tried). So an archive is used only after a bare
``java -XX:SharedArchiveFile=... -version`` accepted it (``verify``: ~0.3 s, and it reads
the archive into the page cache the driver maps a moment later); one that fails is left
alone with a ``class_archive.rejected`` warning and the driver starts without it.

Only the driver: in ``local[N]`` the executors are in the driver's JVM; on a cluster the
executors are started by the workers and do not use it.

``[spark] class_archive``: ``"auto"`` (the default: use this machine's archive if one was
built), ``"off"``, or the path of an archive.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from appliance import logs
from appliance.config import ARCHIVE_AUTO, ARCHIVE_OFF
from appliance.connector import CONNECTOR_JAR, KAFKA_CLIENTS_JAR
from appliance.jdk import java_binary

log = logs.get_logger("appliance.class_archive")

#: Where ``auto`` archives live: ``$APPLIANCE_CLASS_ARCHIVE_DIR``, else the user's cache.
DIR_ENV = "APPLIANCE_CLASS_ARCHIVE_DIR"
#: JVM options that already decide about CDS: an operator's own choice wins.
CDS_FLAGS = ("SharedArchiveFile", "ArchiveClassesAtExit", "-Xshare")


def spark_home() -> Path | None:
    spec = importlib.util.find_spec("pyspark")
    return Path(spec.origin).resolve().parent if spec and spec.origin else None


@dataclass(frozen=True)
class Installation:
    """The facts an archive is keyed by: one ``java`` binary, one pyspark install and the
    appliance's jars on the driver's class path (``jars``: their paths as a class path;
    ``jars_stamp``: each one's size and time, in that order). Records written before the
    jars were part of the key have neither (empty)."""

    java: str
    java_size: int
    java_mtime: int
    spark_home: str
    spark_version: str
    jars: str = ""
    jars_stamp: str = ""

    @property
    def key(self) -> str:
        facts = [self.java, str(self.java_size), str(self.java_mtime), self.spark_home,
                 self.spark_version, self.jars, self.jars_stamp]
        return hashlib.sha256("|".join(facts).encode()).hexdigest()[:16]

    def jar_paths(self) -> list[Path]:
        return [Path(p) for p in self.jars.split(os.pathsep) if p]


_VERSION = re.compile(r"""^__version__(?:\s*:\s*str)?\s*=\s*["']([^"']+)["']""", re.M)


def installation_at(java: Path, home: Path, jars: Sequence[Path] = ()) -> Installation | None:
    """What is installed at these paths now; None if any is gone. The version is read
    from the install's own ``version.py`` (not this environment's metadata), so another
    environment's install can be described too (``appliance.process.class_archive_prune``)."""
    try:
        stat = java.stat()
        found = _VERSION.search((home / "version.py").read_text(encoding="utf-8"))
        jar_stats = [jar.stat() for jar in jars]
    except OSError:
        return None
    if found is None:
        return None
    stamp = ",".join(f"{st.st_size}:{st.st_mtime_ns}" for st in jar_stats)
    return Installation(str(java), stat.st_size, int(stat.st_mtime), str(home), found.group(1),
                        os.pathsep.join(str(jar) for jar in jars), stamp)


#: The appliance's own jars on the driver's class path (``appliance.connector.jars``).
DRIVER_JARS = (CONNECTOR_JAR, KAFKA_CLIENTS_JAR)


def installation() -> Installation | None:
    """This environment's JDK, Spark installation and connector jars; None if any is
    missing (no connector built: nothing to run, so no archive to use or build)."""
    java, home = java_binary(), spark_home()
    if java is None or home is None:
        return None
    return installation_at(java, home, DRIVER_JARS)


def install_key() -> str | None:
    """A short key of this JDK and Spark installation; None if either is missing."""
    found = installation()
    return found.key if found else None


def record_path(archive: Path) -> Path:
    """The JSON next to an archive naming the installation it belongs to (``build``
    writes it; ``appliance.process.class_archive_prune`` reads it)."""
    return archive.with_suffix(".json")


def archive_dir() -> Path:
    configured = os.environ.get(DIR_ENV)
    if configured:
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "appliance" / "class-archive"


def default_archive() -> Path | None:
    """Where ``auto`` looks for (and ``build`` writes) this installation's archive."""
    key = install_key()
    return archive_dir() / f"driver-{key}.jsa" if key else None


VERIFY_TIMEOUT_S = 60.0


def resolve(setting: str) -> Path | None:
    """The archive ``[spark] class_archive`` asks for, if it exists and ``verify`` accepts
    it; None for ``off``."""
    if setting == ARCHIVE_OFF:
        return None
    path = default_archive() if setting == ARCHIVE_AUTO else Path(setting)
    if path is None or not path.is_file():
        return None
    problem = verify(path)
    if problem:
        log.warning("class_archive.rejected", path=str(path), reason=problem)
        return None
    return path


def verify(path: Path) -> str | None:
    """None if a JVM maps ``path`` and runs; else what went wrong, in one line. The class
    path here is deliberately not Spark's (a mismatch only makes the JVM skip the
    archive's classes, with exit 0): what is checked is that mapping it does not abort."""
    java = java_binary()
    if java is None:
        return "no java (JAVA_HOME or PATH)"
    with tempfile.TemporaryDirectory(prefix="class-archive-check-") as empty:
        try:
            proc = subprocess.run([str(java), f"-XX:SharedArchiveFile={path}", "-cp", empty,
                                   "-version"], capture_output=True, text=True,
                                  timeout=VERIFY_TIMEOUT_S, cwd=empty)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"java -version with the archive did not run: {exc}"
    if proc.returncode != 0:
        first = next((line for line in proc.stdout.splitlines() + proc.stderr.splitlines()
                      if line.strip() and not line.startswith("#")), "")
        return f"java -version with the archive exited {proc.returncode}: {first}"[:300]
    return None


def with_archive(java_options: str, archive: Path | None) -> str:
    """``java_options`` plus the option that maps ``archive``, unless there is none or the
    options already say something about CDS."""
    if archive is None or any(flag in java_options for flag in CDS_FLAGS):
        return java_options
    return f"{java_options} -XX:SharedArchiveFile={archive}".strip()
