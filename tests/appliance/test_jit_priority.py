"""``appliance.tuning.JIT_BELOW_TASKS`` on a real JVM: the compiler threads at nice 19 and
every other thread where it was, whether the JVM runs as root or not (read per thread
from ``/proc``)."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from appliance.tuning import GC_OPTIONS, JIT_BELOW_TASKS

SPIN = """public class Spin {
  public static void main(String[] a) {
    long s = 0, end = System.nanoTime() + 8_000_000_000L;
    while (System.nanoTime() < end)
      for (int i = 0; i < 1000; i++) s += Integer.toString(i).hashCode();
    System.out.println(s);
  }
}
"""
COMPILER = re.compile(r"C[12] CompilerThre|Sweeper thread")


def _nice_by_thread(pid: int) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                nice = int(f.read().rsplit(")", 1)[1].split()[16])
        except OSError:
            continue  # ended meanwhile
        out.setdefault(name, set()).add(nice)
    return out


def _as_user(user: str | None) -> list[str]:
    """The command prefix that runs the JVM as ``user`` in the same process (setpriv execs,
    no PAM session and no child in between)."""
    if user is None:
        return []
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("running the JVM as another user needs root and setpriv; the test "
                    "as this user covers an unprivileged JVM when the suite is not root")
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        pytest.skip(f"no user {user!r} on this machine")
    return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
            "--clear-groups", "--"]


@pytest.mark.parametrize("user", [None, "nobody"], ids=["this-user", "unprivileged"])
def test_only_the_compiler_threads_move(user):
    prefix = _as_user(user)
    # pytest's own temporary directories are private to this user: the class goes where
    # the other user can read it
    classes = Path(tempfile.mkdtemp(prefix="jit-priority-"))
    try:
        classes.chmod(0o755)
        (classes / "Spin.java").write_text(SPIN)
        subprocess.run(["javac", "-d", str(classes), str(classes / "Spin.java")],
                       check=True, timeout=120)
        threads, stderr = _threads_of_spin(prefix, classes)
    finally:
        shutil.rmtree(classes, ignore_errors=True)
    compilers = {n: v for n, v in threads.items() if COMPILER.match(n)}
    # "java": the main thread, and a thread HotSpot has started but not named yet
    others = {n: v for n, v in threads.items() if not COMPILER.match(n) and n != "java"}
    assert compilers and all(v == {19} for v in compilers.values()), (threads, stderr)
    assert any("G1" in n for n in others) and all(v == {0} for v in others.values()), threads
    if user is not None:  # lowering its own threads needs no privilege: one warning, no error
        assert "ThreadPriorityPolicy=1 may require system level permission" in stderr


def _threads_of_spin(prefix: list[str], classes: Path) -> tuple[dict[str, set[int]], str]:
    java = subprocess.Popen([*prefix, "java", *GC_OPTIONS, *JIT_BELOW_TASKS, "-cp",
                             str(classes), "Spin"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        threads: dict[str, set[int]] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the compilers and G1 have started
            threads = _nice_by_thread(java.pid)
            if any(COMPILER.match(n) for n in threads) and any("G1" in n for n in threads):
                break
            time.sleep(0.2)
    finally:
        java.kill()
        _, stderr = java.communicate(timeout=30)
    return threads, stderr
