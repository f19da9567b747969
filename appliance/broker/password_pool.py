"""The worker threads that check SASL/PLAIN passwords (``sasl.PasswordCheck``).

One PBKDF2 derivation takes milliseconds of CPU (tens on a loaded host); run on the event
loop, a burst of logins would stall every other client for as long. ``hashlib`` releases
the GIL while it derives, so a thread is enough. The pool is bounded twice: a fixed
number of threads, and at most one check queued per connection (the SASL state machine
refuses a second SaslAuthenticate while one is checked), connections being capped per IP.
On Linux the threads also run at a lower CPU priority (nice +10), so on a busy host the
event loop, which serves the clients that already logged in, wins the CPU first.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

NICE = 10


def _lower_priority() -> None:
    try:  # Linux: priority is per thread, and this thread's id is its process id here
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(),
                       min(os.getpriority(os.PRIO_PROCESS, 0) + NICE, 19))
    except (AttributeError, OSError):
        pass  # elsewhere the checks just share the CPU equally


def new_pool(threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="broker-password-check",
                              initializer=_lower_priority)
