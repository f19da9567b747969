"""``appliance.toml`` for an ``appliance run`` driving the test cluster."""

from __future__ import annotations

from pathlib import Path

from appliance.config import Config, write_config

from support.short_intervals import SHORT_INTERVALS

INTERVALS = SHORT_INTERVALS


def write_cluster_config(directory: Path, cluster, bootstrap: str, topics: dict[str, str],
                         trigger: str, rules_yaml: str, spark: dict[str, str] | None = None,
                         checkpoint: str = "checkpoint", query: dict | None = None) -> Path:
    """The driver on loopback (executors connect back to 127.0.0.1), small executors."""
    (directory / "rules.yml").write_text(rules_yaml)
    return write_config(Config.model_validate({
        "kafka": {"bootstrap_servers": bootstrap},
        "topics": topics,
        "query": {"trigger": trigger, "interval": INTERVALS[trigger],
                  "checkpoint_dir": checkpoint, **(query or {})},
        "rules": {"path": "rules.yml"},
        "spark": {"master": cluster.master_url, "driver_host": "127.0.0.1",
                  "driver_bind_address": "127.0.0.1",
                  "spark.executor.memory": "512m", **(spark or {})},
        "metrics": {"port": 0},
    }), directory / "appliance.toml")
