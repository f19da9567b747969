"""The Spark driver's log4j2 configuration for a terminal (``appliance.process.jvm_log``):
errors and the warnings that call for action reach the terminal as one line each, the
warnings of a clean run and stop do not, and the JVM's stderr (the log file) keeps all.

A real JVM with Spark's own log4j2 jars (pyspark's) and the shipped properties file, the
options built by ``log_options``; a small Java program (the JDK's source launcher) logs as
Spark's classes do, so no Spark start is needed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pyspark
import pytest

from appliance.logs import LogFormat, LogOutput
from appliance.process.jvm_log import DRIVER_JAVA_OPTIONS, log_options, with_log_options

EMIT = """
import org.apache.logging.log4j.LogManager;

public class Emit {
    public static void main(String[] args) {
        LogManager.getLogger("org.apache.spark.scheduler.TaskSetManager").warn(
            "Lost task 0.0 in stage 4.0 (TID 8): TaskKilled (Stage cancelled)");
        LogManager.getLogger("org.apache.kafka.clients.NetworkClient").warn(
            "Connection to node 0 (/127.0.0.1:9092) could not be established.");
        LogManager.getLogger("org.apache.spark.SparkContext").info("Running Spark version");
        LogManager.getLogger("org.apache.spark.scheduler.TaskSchedulerImpl").warn(
            "Initial job has not accepted any resources; check your cluster UI");
        LogManager.getLogger("org.apache.spark.executor.Executor").error(
            "Exception in task 0.0", new RuntimeException("boom"));
    }
}
"""


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    assert java, "no java (JAVA_HOME or PATH): the appliance needs a JDK 17+"
    return java


@pytest.mark.java
def test_terminal_gets_errors_and_action_warnings_the_file_gets_everything(tmp_path):
    source = tmp_path / "Emit.java"
    source.write_text(EMIT)
    terminal, log_file = tmp_path / "terminal", tmp_path / "appliance.log"
    terminal.touch()
    options = log_options(LogOutput(LogFormat.CONSOLE, log_file, str(terminal)))
    jars = Path(pyspark.__file__).parent / "jars"
    with log_file.open("wb") as stderr:
        run = subprocess.run([_java(), *(shlex.split(o)[0] for o in options),
                              "-cp", f"{jars}/*", str(source)], stderr=stderr,
                             stdout=subprocess.PIPE, timeout=120)
    assert run.returncode == 0, log_file.read_text()
    assert terminal.read_text().splitlines() == [
        "spark WARN TaskSchedulerImpl: Initial job has not accepted any resources; check "
        "your cluster UI",
        "spark ERROR Executor: Exception in task 0.0 (boom)"]
    kept = log_file.read_text()
    for text in ("WARN TaskSetManager: Lost task 0.0", "WARN NetworkClient: Connection to node",
                 "WARN TaskSchedulerImpl: Initial job", "ERROR Executor: Exception in task",
                 "java.lang.RuntimeException: boom", "\tat Emit.main"):
        assert text in kept, text
    assert "Running Spark version" not in kept  # INFO: below the threshold, as before


def test_options_only_with_a_log_file_and_never_over_the_operators_own():
    assert log_options(None) == []
    assert log_options(LogOutput(LogFormat.JSON)) == []
    output = LogOutput(LogFormat.CONSOLE, Path("/var/log/a.log"), "/dev/pts/3")
    conf = with_log_options({DRIVER_JAVA_OPTIONS: "-XX:+UseG1GC"}, output)
    assert conf[DRIVER_JAVA_OPTIONS].startswith("-XX:+UseG1GC -Dlog4j2.configurationFile=")
    assert conf[DRIVER_JAVA_OPTIONS].endswith(" -Dappliance.terminal=/dev/pts/3")
    own = {DRIVER_JAVA_OPTIONS: "-Dlog4j2.configurationFile=/etc/spark/log4j2.properties"}
    assert with_log_options(own, output) == own
    spaced = LogOutput(LogFormat.CONSOLE, Path("/tmp/a.log"), "/tmp/my terminal")
    assert log_options(spaced)[-1] == '"-Dappliance.terminal=/tmp/my terminal"'
