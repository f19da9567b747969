"""Install the Debian packages the test suite uses as real peers, when missing.

kcat is an independent librdkafka command-line client used to check the broker;
prometheus is a real server scraping the appliance's metrics (promtool checks the
deployed rule files), and with prometheus-alertmanager it is `make watch`'s local stack;
curl runs the README's metrics command as written; gcc builds the LD_PRELOAD library the
broker's power-loss test uses to drop every write that was not fsynced; systemd-nspawn
(systemd-container), mmdebstrap, ssh and ssh-keygen (openssh-client) build and reach the
Ansible test bed's hosts; dot (graphviz) draws the docs' pictures (``make docs``) and
their test checks they are current. We install them with apt-get when we are root;
otherwise we print the one command a user must run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

PACKAGES = {"kcat": "kcat", "prometheus": "prometheus", "promtool": "prometheus",
            "prometheus-alertmanager": "prometheus-alertmanager",
            "systemd-nspawn": "systemd-container", "mmdebstrap": "mmdebstrap",
            "ssh": "openssh-client", "ssh-keygen": "openssh-client", "ip": "iproute2",
            "curl": "curl", "gcc": "gcc", "dot": "graphviz"}


def missing() -> list[str]:
    return sorted({pkg for binary, pkg in PACKAGES.items() if shutil.which(binary) is None})


def main() -> int:
    todo = missing()
    if not todo:
        return 0
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print(f"system-deps: please install {' '.join(todo)} (sudo apt-get install -y "
              f"{' '.join(todo)})", file=sys.stderr)
        return 0
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    print(f"system-deps: apt-get install {' '.join(todo)}", flush=True)
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *todo],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
