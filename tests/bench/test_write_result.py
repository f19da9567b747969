"""Every bench writes its JSON through ``bench._machine.write_result``: the machine facts
and the run's length land in one shape, and a bench's own machine facts are kept."""

from __future__ import annotations

import json
import os
import time

from bench._machine import write_result


def test_the_result_carries_the_machine_the_load_and_the_elapsed_time(tmp_path, capsys):
    out = tmp_path / "deep" / "bench.json"
    write_result(out, {"benchmark": "x", "machine": {"busy_before": 0.1}},
                 time.monotonic() - 2.0, load_start=0.5)
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "x"
    assert doc["machine"]["cpus"] == os.cpu_count()
    assert doc["machine"]["busy_before"] == 0.1 and doc["machine"]["load_avg_start"] == 0.5
    assert doc["machine"]["load_avg_end"] >= 0
    assert 2.0 <= doc["elapsed_s"] < 60
    assert f"wrote {out}" in capsys.readouterr().err


def test_without_a_starting_load_none_is_claimed(tmp_path):
    write_result(tmp_path / "b.json", {}, time.monotonic())
    assert "load_avg_start" not in json.loads((tmp_path / "b.json").read_text())["machine"]
