"""A lone real-time query's processed offsets, kept in its checkpoint between runs.

A real-time batch commits only at its end, minutes away; inside it only the connector's
durable marks say how far the query got (every event below them processed, its alerts
acknowledged by Kafka), and they live in the driver's memory. A lone instance killed
mid-batch (a crash, the OOM killer, a host's reboot) and started again on its checkpoint
re-read the whole batch since its start. So the runner writes the processed offsets here
once a second (``appliance.process.lone_progress``), and the next run starts from them
when they are ahead of the checkpoint's newest commit.

The file lives inside the checkpoint directory: deleting the checkpoint to start over
deletes it too, and Spark ignores a file it does not know there. Written to a temp file
and renamed, so a reader sees the old offsets or the new ones; a file that does not parse
(a power cut before the data reached the disk) counts as none: the restart then replays,
as it did before.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

NAME = "appliance-progress.json"


def path(checkpoint_dir: str | Path) -> Path:
    return Path(checkpoint_dir) / NAME


def save(checkpoint_dir: str | Path, topic: str, offsets: dict[int, int]) -> None:
    """Keep ``offsets`` (next to read, per partition of ``topic``)."""
    target = path(checkpoint_dir)
    tmp = target.with_name(f".{NAME}.tmp")
    tmp.write_text(json.dumps({"topic": topic, "saved_at": round(time.time(), 3),
                               "offsets": {str(p): o for p, o in sorted(offsets.items())}}),
                   encoding="utf-8")
    os.replace(tmp, target)


def load(checkpoint_dir: str | Path, topic: str) -> dict[int, int]:
    """The kept offsets of ``topic``; {} when there are none, they are another topic's
    (the config names a new one) or the file does not parse."""
    try:
        doc = json.loads(path(checkpoint_dir).read_text(encoding="utf-8"))
        if doc.get("topic") != topic:
            return {}
        return {int(p): int(o) for p, o in doc["offsets"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}
