"""The one error every check before the query's start raises: the query cannot run as
configured.

Task slots (``appliance.process.slots``), the CPUs kept after ``ready``
(``appliance.process.kept_cpus``) and an ``[ha]`` partner that runs another query all
refuse with it; ``appliance run`` prints its message and exits 2, so each message is one
line an operator can act on.
"""

from __future__ import annotations


class PreflightError(Exception):
    """The query could not run as configured (one line, exit 2)."""
