"""The Spark driver's log4j2 configuration for a terminal (``appliance.process.jvm_log``):
errors and the warnings that call for action reach the terminal as one line each, the
warnings of a clean run and stop do not, and the JVM's stderr (the log file) keeps all.

A real JVM with Spark's own log4j2 jars (pyspark's) and the shipped properties file, the
options built by ``log_options``; a small Java program (the JDK's source launcher) logs as
Spark's classes do, so no Spark start is needed. The errors of a continuous query's clean
stop stay off the terminal (``ContinuousStopNoise``, in the connector jar): checked the same
way, and once through a real driver on a pseudo-terminal, as ``build_session`` starts it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pyspark
import pytest

from appliance.connector import CONNECTOR_JAR
from appliance.logs import LogFormat, LogOutput
from appliance.process.jvm_log import (
    DRIVER_JAVA_OPTIONS,
    TERMINAL_APPENDER,
    log_options,
    quiet_continuous_stop,
    with_log_options,
)

from support.terminal import Terminal

ROOT = Path(__file__).resolve().parents[2]

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


# What a continuous query's stop logs on its task thread when the task reports an epoch
# boundary after the epoch coordinator was unregistered (io.appliance.log.ContinuousStopNoise),
# then what a task that fails for another reason logs: the same four lines, another cause.
STOP_RACE = """
import org.apache.logging.log4j.LogManager;
import org.apache.spark.SparkException;

public class StopRace {
    static void task(Throwable cause) {
        LogManager.getLogger("org.apache.spark.util.Utils").error("Aborting task", cause);
        var writer = LogManager.getLogger(
            "org.apache.spark.sql.execution.streaming.continuous.ContinuousWriteRDD");
        writer.error("Writer for partition 0 is aborting.");
        writer.error("Writer for partition 0 aborted.");
        LogManager.getLogger("org.apache.spark.executor.Executor").error(
            "Exception in task 0.0 in stage 4.0 (TID 8)", cause);
    }

    public static void main(String[] args) {
        if (!io.appliance.log.ContinuousStopNoise.install(args[0])) {
            throw new IllegalStateException("no appender " + args[0]);
        }
        task(new SparkException("Could not find EpochCoordinator-c393d4e8--9fe5299e."));
        task(new SparkException("Epoch marker generation failed",
                                new SparkException("Could not find EpochCoordinator-c3--9f.")));
        task(new RuntimeException("boom"));
        LogManager.getLogger("org.apache.spark.sql.execution.streaming.continuous."
            + "ContinuousWriteRDD").error("Writer for partition 1 is aborting.");
    }
}
"""

# The same lines logged through a real driver built by build_session on a terminal.
SESSION = """
import sys
from appliance import logs
from appliance.config import load_config
from appliance.connector import driver_jvm
from appliance.process.session import build_session

logs.configure(fmt="console", file=sys.argv[1])
spark = build_session(load_config(environ={"APPLIANCE_SPARK_MASTER": "local[1]"}))
jvm = driver_jvm(spark)
gone = jvm.org.apache.spark.SparkException("Could not find EpochCoordinator-a--b.")
for cause in (gone, jvm.java.lang.RuntimeException("boom")):
    jvm.org.apache.logging.log4j.LogManager.getLogger("org.apache.spark.executor.Executor") \
        .error("Exception in task 0.0 in stage 4.0 (TID 8)", cause)
spark.stop()
print("session done", file=sys.stderr)
"""


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    assert java, "no java (JAVA_HOME or PATH): the appliance needs a JDK 17+"
    return java


def _run_logging(tmp_path, name: str, program: str, *args: str,
                 classpath: tuple[str, ...] = ()) -> tuple[str, str]:
    """Run ``program`` (class ``name``) under the terminal configuration, with pyspark's
    jars (and ``classpath``); what reached the terminal, and the log file (its stderr)."""
    source = tmp_path / f"{name}.java"
    source.write_text(program)
    terminal, log_file = tmp_path / "terminal", tmp_path / "appliance.log"
    terminal.touch()
    options = log_options(LogOutput(LogFormat.CONSOLE, log_file, str(terminal)))
    jars = Path(pyspark.__file__).parent / "jars"
    with log_file.open("wb") as stderr:
        run = subprocess.run([_java(), *(shlex.split(o)[0] for o in options),
                              "-cp", ":".join([f"{jars}/*", *classpath]), str(source), *args],
                             stderr=stderr, stdout=subprocess.PIPE, timeout=120)
    assert run.returncode == 0, log_file.read_text()
    return terminal.read_text(), log_file.read_text()


@pytest.mark.java
def test_terminal_gets_errors_and_action_warnings_the_file_gets_everything(tmp_path):
    shown, kept = _run_logging(tmp_path, "Emit", EMIT)
    assert shown.splitlines() == [
        "spark WARN TaskSchedulerImpl: Initial job has not accepted any resources; check "
        "your cluster UI",
        "spark ERROR Executor: Exception in task 0.0 (boom)"]
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


@pytest.mark.java
def test_a_continuous_stops_coordinator_race_stays_off_the_terminal_other_failures_do_not(
        tmp_path):
    shown, kept = _run_logging(tmp_path, "StopRace", STOP_RACE, TERMINAL_APPENDER,
                               classpath=(str(CONNECTOR_JAR),))
    assert shown.splitlines() == [
        "spark ERROR Utils: Aborting task (boom)",
        "spark ERROR ContinuousWriteRDD: Writer for partition 0 is aborting.",
        "spark ERROR ContinuousWriteRDD: Writer for partition 0 aborted.",
        "spark ERROR Executor: Exception in task 0.0 in stage 4.0 (TID 8) (boom)",
        "spark ERROR ContinuousWriteRDD: Writer for partition 1 is aborting."]
    assert kept.count("ERROR Utils: Aborting task") == 3
    assert kept.count("ERROR ContinuousWriteRDD: Writer for partition 0 is aborting.") == 3
    assert kept.count("Could not find EpochCoordinator") == 4  # two tasks, two lines each


def test_the_filter_goes_in_only_where_the_driver_writes_to_a_terminal():
    class NoJvm:  # never reached: nothing to filter without a terminal
        def __getattr__(self, name):
            raise AssertionError(f"the JVM was asked for {name}")
    assert quiet_continuous_stop(NoJvm(), None) is False
    assert quiet_continuous_stop(NoJvm(), LogOutput(LogFormat.JSON)) is False
    assert quiet_continuous_stop(NoJvm(), LogOutput(LogFormat.CONSOLE, Path("/tmp/a.log"))) \
        is False


@pytest.mark.spark
def test_a_driver_on_a_terminal_filters_the_coordinator_race_and_shows_other_errors(tmp_path):
    log_file = tmp_path / "appliance.log"
    term = Terminal(["python", "-c", SESSION, str(log_file)], ROOT,
                    {"PATH": f"{ROOT / '.venv' / 'bin'}:/usr/bin:/bin",
                     **{k: v for k, v in os.environ.items() if k == "JAVA_HOME"}},
                    tmp_path / "terminal.txt")
    try:
        assert term.wait(timeout=300) == 0, term.text()[-3000:]
    finally:
        term.close()
    shown = term.text()
    assert "session done" in shown, shown[-3000:]
    errors = [line for line in shown.splitlines() if line.startswith("spark ERROR")]
    assert errors == ["spark ERROR Executor: Exception in task 0.0 in stage 4.0 (TID 8) "
                      "(boom)"], shown[-3000:]
    assert log_file.read_text().count("Could not find EpochCoordinator-a--b.") == 1
