"""``appliance class-archive prune``: remove the archives no installation can use any more.

An archive is ~180 MB and belongs to one JDK and one pyspark install (its name carries
their key, ``appliance.process.class_archive``). Upgrading either, or deleting a virtualenv, makes
``auto`` look for a new name, and the old file stayed in the cache for good: a machine
that had been set up from four checkouts held four of them. ``build`` now writes a record
of the installation next to each archive (``driver-<key>.json``), and pruning removes an
archive exactly when its record's installation is gone or is no longer what the key was
made of (the JVM would refuse the archive's classes anyway), or its record predates the
connector jars in the key (no installation asks for its name). Archives without a record
(built before records existed, or copied in) are reported and left: whose they are
cannot be told, and the directory may be shared by several installations. ``build``
prunes after writing; nothing else deletes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from appliance.process.class_archive import Installation, installation_at, record_path

GLOB = "driver-*.jsa"


@dataclass(frozen=True)
class Verdict:
    archive: Path
    removed: bool
    reason: str


def _recorded(archive: Path) -> Installation | str:
    """The installation an archive's record names, or why there is none to go by."""
    try:
        data = json.loads(record_path(archive).read_text(encoding="utf-8"))
        return Installation(**data)
    except FileNotFoundError:
        return "no record of its installation (built before records were kept?)"
    except (OSError, ValueError, TypeError) as exc:
        return f"unreadable record ({exc.__class__.__name__})"


def judge(archive: Path) -> Verdict:
    """Whether ``archive`` is still usable by the installation it was built for."""
    recorded = _recorded(archive)
    if isinstance(recorded, str):
        return Verdict(archive, False, f"{recorded}; delete it by hand if unused")
    if not recorded.jars:
        return Verdict(archive, True, "built before the connector jars were part of an "
                                      "archive's key: no installation looks for it any more")
    now = installation_at(Path(recorded.java), Path(recorded.spark_home), recorded.jar_paths())
    if now is None:
        return Verdict(archive, True, f"its installation is gone ({recorded.java}, "
                                      f"{recorded.spark_home})")
    if now != recorded:
        return Verdict(archive, True, "its installation changed since it was built "
                                      f"(pyspark {recorded.spark_version} -> "
                                      f"{now.spark_version}, a new java, or rebuilt "
                                      f"connector jars)")
    return Verdict(archive, False, f"in use by {recorded.spark_home}")


def prune(directory: Path, dry_run: bool = False) -> list[Verdict]:
    """Judge every archive in ``directory`` and remove the unusable ones (with their
    records) unless ``dry_run``. Returns every verdict, removed or not."""
    verdicts = [judge(archive) for archive in sorted(directory.glob(GLOB))]
    if not dry_run:
        for verdict in verdicts:
            if verdict.removed:
                verdict.archive.unlink(missing_ok=True)
                record_path(verdict.archive).unlink(missing_ok=True)
    return verdicts
