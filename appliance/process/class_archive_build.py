"""``appliance class-archive build``: write the driver's CDS archive
(appliance.process.class_archive) by starting the appliance once as users start it and
letting its JVM dump what it loaded.

The dumping run is a real ``appliance run`` in a process of its own (embedded broker,
a scratch checkpoint, the packaged example rules, the default warm-up), so the archive
holds the classes a real start loads up to ``appliance.ready``: session, SQL parser and
analyzer, code generation, the connector's reader and writer. The JVM writes the archive
only while it exits, after the appliance's Python process is gone, so the build waits for
the whole process group to end and then moves the file into place in one rename: a JVM
starting meanwhile maps the old archive or none, never half a file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from appliance.config import Config, write_config
from appliance.process import process_group
from appliance.process.class_archive import default_archive, installation, record_path, verify
from appliance.process.class_archive_prune import prune
from appliance.process.logwatch import EventNotLogged, log_tail, wait_for_event
from appliance.rules.rules_file import EXAMPLE_RULES
from appliance.tuning import GC_OPTIONS

READY_TIMEOUT_S = 600.0  # a cold start on a loaded 2-core machine took up to ~2 min
STOP_TIMEOUT_S = 120.0
DUMP_TIMEOUT_S = 300.0   # the JVM's exit, archive dump included (~10 s measured)


class ArchiveBuildError(RuntimeError):
    """The archive could not be written; the message says why (and the run's log tail)."""


def write_record(archive: Path) -> None:
    """Record this installation next to ``archive`` (``appliance.process.class_archive_prune``)."""
    built_for = installation()
    if built_for is not None:
        record_path(archive).write_text(json.dumps(asdict(built_for), indent=1) + "\n",
                                        encoding="utf-8")


def build(target: Path | None = None, progress: Callable[[str], None] = print) -> Path:
    """Write the archive to ``target`` (default: this installation's ``auto`` path)."""
    target = target or default_archive()
    if target is None:
        raise ArchiveBuildError("no java (JAVA_HOME or PATH) or no pyspark: nothing to "
                                "archive for")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="class-archive-", dir=target.parent) as tmp:
        scratch = Path(tmp)
        dump = scratch / "driver.jsa"
        config = write_config(Config.model_validate({
            "kafka": {"embedded_port": 0},  # never the default port an `appliance run` holds
            "query": {"checkpoint_dir": str(scratch / "checkpoint")},
            "rules": {"path": str(EXAMPLE_RULES)},
            "spark": {"class_archive": "off", "spark.driver.extraJavaOptions":
                      " ".join((*GC_OPTIONS, f"-XX:ArchiveClassesAtExit={dump}"))},
            "metrics": {"port": 0},
        }), scratch / "appliance.toml")
        log = scratch / "run.log"
        progress("class-archive: starting the appliance once to record its classes")
        started = time.monotonic()
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "appliance", "run", "--config", str(config)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=scratch, start_new_session=True)
        try:
            ready = wait_for_event(log, "appliance.ready", proc, READY_TIMEOUT_S)
            progress(f"class-archive: ready after {ready.get('startup_s')} s; stopping "
                     f"it so the JVM writes the archive")
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=STOP_TIMEOUT_S)
            # The JVM outlives Python by its dump: wait for it, never kill it mid-write.
            process_group.wait_gone(proc.pid, DUMP_TIMEOUT_S)
        except (EventNotLogged, subprocess.TimeoutExpired) as exc:
            raise ArchiveBuildError(f"the recording run failed: {exc}") from exc
        finally:
            process_group.kill(proc)
        if not dump.is_file() or dump.stat().st_size == 0:
            raise ArchiveBuildError(f"the JVM wrote no archive to {dump}; its output:\n"
                                    f"{log_tail(log)}")
        problem = verify(dump)
        if problem:
            raise ArchiveBuildError(f"the written archive is unusable: {problem}")
        os.replace(dump, target)
    progress(f"class-archive: wrote {target} ({target.stat().st_size / 2**20:.0f} MiB) "
             f"in {time.monotonic() - started:.0f} s")
    write_record(target)
    if target == default_archive():  # the shared cache: drop what nobody can use any more
        for verdict in prune(target.parent):
            if verdict.removed:
                progress(f"class-archive: removed {verdict.archive}: {verdict.reason}")
    return target
