"""Every line of the appliance's log is JSON with a stable event name, the libraries' lines
included; and the appliance's own group-less consumers give kafka-python nothing to warn
about at start."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

from appliance.logs import FOREIGN_DEFAULT_EVENT, foreign_event
from appliance.topics import offsets_consumer, partition_counts

ROOT = Path(__file__).resolve().parents[2]

# kafka-python 3's slow-step warning, as its selector formats it (a Task repr and two
# durations: different on every line).
SLOW_STEP = ("Task <kafka.net.selector.Task object at 0x7f680489e5d0> ran for 2.293s "
             "(>0.100s threshold). It is blocking the event loop -- likely a tight sync "
             "loop inside a coroutine. Other pollers will time out.")

_EMIT = f"""
import logging
from appliance import logs
logs.configure()
logs.get_logger("appliance.test").info("test.own", n=1)
logging.getLogger("kafka.net.selector").warning({SLOW_STEP!r})
logging.getLogger("py4j.clientserver").warning("Answer received: %s", "!yv")
"""


def emitted_lines() -> list[dict]:
    out = subprocess.run([sys.executable, "-c", _EMIT], capture_output=True, text=True,
                         cwd=ROOT, timeout=60, check=True)
    return [json.loads(line) for line in out.stderr.splitlines() if line.strip()]


def test_library_lines_get_stable_event_names_and_keep_their_text():
    own, slow, other = emitted_lines()
    assert own["event"] == "test.own" and own["component"] == "appliance.test"
    assert "message" not in own

    assert slow["event"] == "kafka.io_step_slow"
    assert slow["component"] == "kafka.net.selector" and slow["level"] == "warning"
    assert slow["seconds"] == 2.293 and slow["threshold_s"] == 0.1
    assert slow["message"] == SLOW_STEP

    assert other["event"] == FOREIGN_DEFAULT_EVENT
    assert other["component"] == "py4j.clientserver"
    assert other["message"] == "Answer received: !yv"


def test_named_event_only_for_its_own_library():
    # The same words from another logger are not kafka-python's selector.
    assert foreign_event("kafka.net.selector", SLOW_STEP)[0] == "kafka.io_step_slow"
    assert foreign_event("kafka.net.selector.sub", SLOW_STEP)[0] == "kafka.io_step_slow"
    assert foreign_event("kafka.net.selectorx", SLOW_STEP)[0] == FOREIGN_DEFAULT_EVENT
    assert foreign_event("kafka.net.selector", "connected")[0] == FOREIGN_DEFAULT_EVENT


def test_offsets_consumers_start_without_the_auto_commit_warning(broker, new_topic, caplog):
    topic = new_topic(partitions=3)
    config = {"bootstrap_servers": [broker.bootstrap]}
    with caplog.at_level(logging.WARNING, logger="kafka"):
        assert partition_counts(config, [topic]) == {topic: 3}
        consumer = offsets_consumer(config)
        consumer.close()
    assert [r.getMessage() for r in caplog.records if r.name.startswith("kafka")] == []
    assert not consumer.config["enable_auto_commit"]
