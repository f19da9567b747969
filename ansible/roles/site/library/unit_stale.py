#!/usr/bin/python3
"""Ansible module: whether a running systemd unit started before its inputs last changed.

The deploy restarts a service when what it runs on changed since it started: the
installed packages (a stamp the common role writes after each install), the Spark
configuration, its unit or its own configuration files. Asking the host, instead of
remembering which task changed what, keeps a run that failed half-way (a worker that did
not come back) converging: the next run still restarts every service started before its
inputs changed, and a service restarted since is left alone. Read-only: it runs in
--check too.
"""

from __future__ import annotations

import os
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: unit_stale
short_description: Whether a running systemd unit started before its inputs last changed
description:
  - Compares the unit's last activation time with the modification time of each path.
  - A unit that is not active is not stale (starting it reads the current files).
options:
  unit:
    description: The systemd unit's name.
    type: str
    required: true
  paths:
    description: Files the unit runs on; missing ones are ignored.
    type: list
    elements: path
    required: true
author: appliance maintainers
"""

RETURN = r"""
stale:
  description: Whether the unit runs and some path changed after it started.
  type: bool
  returned: always
running:
  description: Whether the unit is active.
  type: bool
  returned: always
newer:
  description: The paths modified after the unit started.
  type: list
  elements: str
  returned: always
"""


def _show(unit: str) -> dict[str, str]:
    out = subprocess.run(
        ["systemctl", "show", "--property=ActiveState,ActiveEnterTimestampMonotonic", unit],
        capture_output=True, text=True, check=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def main() -> None:
    module = AnsibleModule(
        argument_spec={"unit": {"type": "str", "required": True},
                       "paths": {"type": "list", "elements": "path", "required": True}},
        supports_check_mode=True)
    unit, paths = module.params["unit"], module.params["paths"]
    try:
        props = _show(unit)
    except (OSError, subprocess.CalledProcessError) as exc:
        module.fail_json(msg=f"systemctl show {unit}: {exc}")
    running = props.get("ActiveState") == "active"
    newer: list[str] = []
    if running:
        # systemd's monotonic clock is the kernel's (CLOCK_MONOTONIC): turn the unit's
        # activation into wall-clock time to compare with the files' mtimes.
        entered_mono = int(props.get("ActiveEnterTimestampMonotonic") or 0) / 1e6
        started = time.time() - (time.monotonic() - entered_mono)
        for path in paths:
            try:
                if os.stat(path).st_mtime > started:
                    newer.append(path)
            except FileNotFoundError:
                continue
    module.exit_json(changed=False, stale=bool(newer), running=running, newer=newer)


if __name__ == "__main__":
    main()
