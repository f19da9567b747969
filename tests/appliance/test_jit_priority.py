"""``appliance.tuning.JIT_BELOW_TASKS`` on a real JVM: the compiler threads at nice 19 and
every other thread where it was, whether the JVM runs as root or not (read per thread
from ``/proc``)."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import time

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
    if user is None:
        return []
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("running the JVM as another user needs root and runuser; the test "
                    "as this user covers an unprivileged JVM when the suite is not root")
    try:
        pwd.getpwnam(user)
    except KeyError:
        pytest.skip(f"no user {user!r} on this machine")
    return ["runuser", "-u", user, "--"]


@pytest.mark.parametrize("user", [None, "nobody"], ids=["this-user", "unprivileged"])
def test_only_the_compiler_threads_move(tmp_path, user):
    prefix = _as_user(user)
    (tmp_path / "Spin.java").write_text(SPIN)
    subprocess.run(["javac", "-d", str(tmp_path), str(tmp_path / "Spin.java")], check=True,
                   timeout=120)
    tmp_path.chmod(0o755)
    java = subprocess.Popen([*prefix, "java", *GC_OPTIONS, *JIT_BELOW_TASKS, "-cp",
                             str(tmp_path), "Spin"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        pid = java.pid
        if prefix:  # runuser's child is the JVM
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                children = open(f"/proc/{java.pid}/task/{java.pid}/children").read().split()
                if children:
                    pid = int(children[0])
                    break
                time.sleep(0.1)
        threads: dict[str, set[int]] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the compilers and G1 have started
            threads = _nice_by_thread(pid)
            if any(COMPILER.match(n) for n in threads) and any("G1" in n for n in threads):
                break
            time.sleep(0.2)
    finally:
        java.kill()
        _, stderr = java.communicate(timeout=30)
    compilers = {n: v for n, v in threads.items() if COMPILER.match(n)}
    # "java": the main thread, and a thread HotSpot has started but not named yet
    others = {n: v for n, v in threads.items() if not COMPILER.match(n) and n != "java"}
    assert compilers and all(v == {19} for v in compilers.values()), threads
    assert any("G1" in n for n in others) and all(v == {0} for v in others.values()), threads
    if user is not None:  # lowering its own threads needs no privilege: one warning, no error
        assert "ThreadPriorityPolicy=1 may require system level permission" in stderr
