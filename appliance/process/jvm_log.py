"""Where the Spark driver JVM's own log lines go when the appliance has a log file.

On a terminal the appliance writes everything to its log file and shows people a short
view (``appliance.logs``). The driver JVM inherits the process's stderr, which then is the
log file, so Spark's log4j lines and the JVM's own notices ("Using incubator modules")
land there whole. What still belongs on the terminal (Spark's errors and the few warnings
that call for action) reaches it through ``log4j2-terminal.properties``, shipped next to
this module, which writes those lines to the terminal's device as well. Once the driver
runs, ``quiet_continuous_stop`` adds a filter (in the connector jar, which that file cannot
name) that keeps the errors of a continuous query's clean stop off the terminal.

Without a log file (JSON on stderr, for a supervisor or a test), Spark keeps its own
configuration and everything goes to stderr as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from appliance.logs import LogOutput

if TYPE_CHECKING:  # py4j comes with pyspark, which the modules that start Spark import
    from py4j.java_gateway import JVMView

TERMINAL_CONFIG = Path(__file__).with_name("log4j2-terminal.properties")
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# The system property the terminal configuration reads the terminal's device from.
TERMINAL_PROPERTY = "appliance.terminal"
# The appender of log4j2-terminal.properties that writes to the terminal.
TERMINAL_APPENDER = "terminal"


def _option(name: str, value: str) -> str:
    """``-Dname=value``, quoted the way Spark splits ``extraJavaOptions`` if it has blanks."""
    option = f"-D{name}={value}"
    return f'"{option}"' if any(c.isspace() for c in option) else option


def log_options(output: LogOutput | None) -> list[str]:
    """The driver's JVM options for ``output``; none unless it has a log file."""
    if output is None or output.file is None:
        return []
    options = [_option("log4j2.configurationFile", str(TERMINAL_CONFIG))]
    if output.terminal:
        options.append(_option(TERMINAL_PROPERTY, output.terminal))
    return options


def with_log_options(conf: dict[str, str], output: LogOutput | None) -> dict[str, str]:
    """``conf`` with the driver's log options added to its ``extraJavaOptions``, unless the
    operator chose a log4j2 configuration there already."""
    options = log_options(output)
    current = conf.get(DRIVER_JAVA_OPTIONS, "")
    if not options or "log4j2.configurationFile" in current:
        return conf
    return {**conf, DRIVER_JAVA_OPTIONS: " ".join([current, *options]).strip()}


def quiet_continuous_stop(jvm: JVMView, output: LogOutput | None) -> bool:
    """Keep the errors Spark logs when a continuous query stops cleanly (its tasks finding
    the epoch coordinator gone: ``io.appliance.log.ContinuousStopNoise`` says why) off the
    terminal; the log file keeps them. True if the driver writes to a terminal through the
    shipped configuration and now filters them; False where it does not (no terminal, or
    the operator's own log4j2 configuration)."""
    if output is None or output.file is None or not output.terminal:
        return False
    return bool(jvm.io.appliance.log.ContinuousStopNoise.install(TERMINAL_APPENDER))
