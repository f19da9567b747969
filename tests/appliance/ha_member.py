"""A pair member without Spark, as a child process a test can kill -9 or SIGSTOP:
``python ha_member.py BOOTSTRAP GROUP INSTANCE CHECKPOINT [STOP_S [SESSION_MS]]`` joins the
group (session timeout ``SESSION_MS``, 6 s if not given), logs its ``ha.*`` events as JSON
lines on stderr, and holds its role until killed, or fenced: then it takes ``STOP_S``
seconds (a query stopping) before it leaves."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from appliance import logs
from appliance.ha.election import Election, ElectionSettings

SESSION_MS = 6000


def main() -> None:
    bootstrap, group, instance, checkpoint = sys.argv[1:5]
    stop_s = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    session_ms = int(sys.argv[6]) if len(sys.argv) > 6 else SESSION_MS
    logs.configure(fmt="json")
    election = Election(ElectionSettings(group, instance, session_ms, "events",
                                         Path(checkpoint)),
                        {"bootstrap_servers": bootstrap.split(",")})
    election.start()
    election.wait_active(threading.Event())
    election.serve_from({})  # its "query" starts: the election commits from here on
    while election.fenced() is None:
        time.sleep(0.1)
    time.sleep(stop_s)
    election.close()


if __name__ == "__main__":
    main()
