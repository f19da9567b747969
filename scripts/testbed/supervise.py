"""Keep one test-bed host running: what ``systemd-nspawn@.service`` does on a systemd machine.

This machine has no systemd of its own, so nobody would restart a container after
``systemctl reboot`` inside it (nspawn exits 133 then and expects its caller to start it
again). This process first moves itself into the host's own cgroups (without that, every
container would share one cgroup and systemd inside would see its siblings), then runs
``systemd-nspawn`` and starts it again after each reboot. SIGTERM asks the container to
power off (nspawn turns it into an orderly shutdown) and returns when it is gone.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time

REBOOT_EXIT = 133          # systemd-nspawn: the container asked for a reboot
MAX_BOOTS = 1000           # bounded: a container that reboots forever is a bug
SHUTDOWN_GRACE_S = 30.0


def enter_cgroups(paths: list[str]) -> None:
    for path in paths:
        with open(f"{path}/cgroup.procs", "w") as fh:
            fh.write("0")  # "0" = the writing process


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cgroup", action="append", default=[], help="cgroup dir to enter")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- systemd-nspawn ...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    enter_cgroups(args.cgroup)

    stopping = False
    child: subprocess.Popen | None = None

    def on_term(_signum, _frame):
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    for boot in range(MAX_BOOTS):
        print(f"supervise: boot {boot}: {' '.join(command)}", flush=True)
        child = subprocess.Popen(command)
        while True:
            try:
                code = child.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                continue
        print(f"supervise: nspawn exited {code}", flush=True)
        if stopping or code != REBOOT_EXIT:
            return 0 if stopping else code
        time.sleep(0.2)
    return 1


if __name__ == "__main__":
    sys.exit(main())
