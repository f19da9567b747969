"""The bench's process-priority lever (bench._sched.Priority): what a unit's ``Nice=`` gives
a service, applied to real processes and read back from /proc."""

from __future__ import annotations

import os
import subprocess
import sys

from bench._sched import Priority, renice, tasks


def nice_of(tid: int) -> int:
    with open(f"/proc/{tid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


def test_the_appliance_nice_is_set_before_the_child_runs_and_inherited_by_its_threads():
    code = ("import os, threading, time; t = threading.Thread(target=time.sleep, args=(5,)); "
            "t.start(); print(threading.get_native_id(), t.native_id, flush=True); t.join()")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             preexec_fn=Priority(appliance_nice=10).preexec)
    try:
        main, thread = (int(t) for t in child.stdout.readline().split())
        assert nice_of(main) == nice_of(thread) == 10  # absolute, as a unit's Nice=
    finally:
        child.kill()
        child.wait(timeout=10)


def test_renice_moves_every_thread_of_a_running_process():
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    code = ("import threading, time; t = threading.Thread(target=time.sleep, args=(5,)); "
            "t.start(); print('up', flush=True); t.join()")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "up"
        threads = tasks(child.pid)
        assert len(threads) >= 2
        renice([child.pid], mine + 7)
        assert {nice_of(t) for t in threads} == {mine + 7}
    finally:
        child.kill()
        child.wait(timeout=10)
    assert os.getpriority(os.PRIO_PROCESS, 0) == mine  # the caller itself unchanged
