"""Who this instance is in its pair: its name, the control topic, its own checkpoint.

Two instances of a pair may share one ``[query] checkpoint_dir`` (same host, or a shared
path): each keeps its state in a folder of its own name beneath it, so neither ever
resumes from the other's checkpoint.
"""

from __future__ import annotations

import socket
from pathlib import Path

from appliance.config import Config

#: The control topic's name: the HA group's name plus this suffix; one partition.
CONTROL_SUFFIX = ".ha"


def instance_name(config: Config) -> str:
    """``[ha] instance``, else ``<host name>-<metrics port>``: stable across restarts on
    one host, distinct for two instances that differ only in their metrics port."""
    if config.ha.instance is not None:
        return config.ha.instance
    host = socket.gethostname().split(".")[0] or "host"
    return f"{host}-{config.metrics.port}"


def control_topic(group: str) -> str:
    return f"{group}{CONTROL_SUFFIX}"


def instance_config(config: Config) -> Config:
    """``config`` with ``[query] checkpoint_dir`` pointing at this instance's own folder
    beneath it; unchanged without ``[ha]``."""
    if not config.ha.enabled:
        return config
    own = Path(config.query.checkpoint_dir) / instance_name(config)
    query = config.query.model_copy(update={"checkpoint_dir": str(own)})
    return config.model_copy(update={"query": query})
