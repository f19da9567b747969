"""Children that die with their parent, whatever kills it.

``appliance watch`` stops Prometheus and Alertmanager on Ctrl-C or SIGTERM, but a
``kill -9`` of the watch (or the OOM killer) runs none of its code: the servers kept
running, holding their ports and data directory. Linux's parent-death signal
(``prctl(PR_SET_PDEATHSIG)``), set in the child between fork and exec, makes the kernel
send the child SIGTERM when the parent dies; it survives ``exec``. Not Linux: no effect.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with(parent_pid: int, sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``subprocess.Popen(preexec_fn=...)``: the child gets ``sig`` when ``parent_pid``
    (the process calling Popen) dies, and exits at once if it died already."""

    def set_in_child() -> None:
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)
        except (AttributeError, OSError):
            return  # not Linux
        if os.getppid() != parent_pid:  # the parent died before the call above
            os._exit(1)

    return set_in_child
