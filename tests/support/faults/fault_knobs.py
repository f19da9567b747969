"""Short or long: ``make test`` runs every fault short; ``make faults`` sets
``FAULTS_LONG=1`` for the long variants (more rounds, longer outages, higher rates)."""

from __future__ import annotations

import os

LONG = os.environ.get("FAULTS_LONG") == "1"


def knob(short, long):
    """The short value in ``make test``, the long one in ``make faults``."""
    return long if LONG else short
