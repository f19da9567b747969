"""The fault suite's ``appliance run`` config: each trigger at an interval short enough
for its faults (the process itself is ``appliance_process.ApplianceProcess``)."""

from __future__ import annotations

from pathlib import Path

from appliance.config import Config
from appliance.config import write_config as write_config_file

from support.short_intervals import SHORT_INTERVALS

ROOT = Path(__file__).resolve().parents[3]
INTERVALS = SHORT_INTERVALS


def write_config(directory: Path, bootstrap: str, topics: dict[str, str], trigger: str,
                 checkpoint: Path, rules: Path, **query: object) -> Path:
    """``query``: more ``[query]`` settings (e.g. ``stall_timeout``)."""
    return write_config_file(Config.model_validate({
        "kafka": {"bootstrap_servers": bootstrap},
        "topics": topics,
        "query": {"trigger": trigger, "interval": INTERVALS[trigger],
                  "checkpoint_dir": str(checkpoint), **query},
        "rules": {"path": str(rules)},
        "spark": {"master": "local[2]"},
        "metrics": {"port": 0},
    }), directory / f"appliance-{trigger}.toml")
