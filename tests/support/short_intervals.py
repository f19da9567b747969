"""The ``[query] interval`` the suites run each trigger at: short, so that an epoch or a
batch (and with it a commit, the lag metrics, a replay after a kill) happens within a
test's bounds. Real-time runs the shortest batch Spark accepts (``appliance.trigger``)
instead of its 5-minute default; replay is the same mechanism at any batch length."""

from __future__ import annotations

from appliance.trigger import MODES

SHORT_INTERVALS: dict[str, str] = {
    "continuous": "500 milliseconds",
    "realtime": MODES["realtime"].min_interval or "5 seconds",
    "microbatch": "200 milliseconds",
}
