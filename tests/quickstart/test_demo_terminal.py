"""``make demo`` on a terminal, as the README's first block has it (``--duration 5s``, the
report in the test's directory): readable lines, the summary, and none of Spark's
warnings or a traceback, while its log file keeps everything.

Under a pseudo-terminal (``terminal.Terminal``): what the demo shows depends on stderr
being a terminal, so no other way tests what a person sees.
"""

from __future__ import annotations

import json
import re

import pytest

from appliance.process.logwatch import log_events

from support.quickstart.quickstart_blocks import (
    ROOT,
    SPARK_WARNING,
    alarming,
    block,
    shortened,
    user_env,
)
from support.terminal import Terminal

DEMO_S = 1800  # a bound: `make demo` checks set-up, then a JVM start and 5 s of load


@pytest.mark.timeout(DEMO_S + 300)
def test_make_demo_on_a_terminal_shows_no_spark_warning_and_logs_everything(tmp_path):
    report = tmp_path / "demo.json"
    command = shortened(block("make-demo"), {
        "make demo": f'make demo DEMO_ARGS="--duration 5s --report {report}"'})
    term = Terminal(["bash", "-e", "-c", command], ROOT, user_env(), tmp_path / "terminal.txt")
    try:
        code = term.wait(timeout=DEMO_S)
    finally:
        term.close()
    shown = term.text()
    assert code == 0, shown[-4000:]
    log_file = tmp_path / "demo.log"  # the report's name, .log
    assert f"full log: {log_file}" in shown
    assert re.search(r"^appliance demo \(continuous\): \d+ events at \d+/s, alerts (\d+)/\1 "
                     r"\(lost 0\)", shown, re.M), shown[-4000:]
    assert re.search(r"\[info\s*\] appliance\.ready\s", shown)  # the readable view
    assert not alarming(shown), f"{alarming(shown)}\n{shown[-4000:]}"

    events = log_events(log_file)
    assert {e["event"] for e in events} >= {
        "broker.ready", "spark.ready", "appliance.ready", "run.finished",
        "demo.report_written", "broker.stopped"}
    assert SPARK_WARNING.search(log_file.read_text()), "no Spark WARN line in the log file"
    assert json.loads(report.read_text())["lost"] == 0
