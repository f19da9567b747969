"""A member's timers (session, rebalance, revocation): one way to restart one.

Both coordinators (the classic protocol's and KIP-848's) keep a timer per member that
every sign of life pushes back: the old handle is cancelled and a new one armed on the
running loop. Written once here so the two keep the same rule.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


def rearm(old: asyncio.TimerHandle | None, delay_s: float,
          callback: Callable[..., object], *args: object) -> asyncio.TimerHandle:
    """Cancel ``old`` (if any) and call ``callback(*args)`` ``delay_s`` from now instead."""
    if old is not None:
        old.cancel()
    return asyncio.get_running_loop().call_later(delay_s, callback, *args)
