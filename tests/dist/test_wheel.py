"""``make dist`` gives one wheel that runs the product with no checkout anywhere near it.

The wheel is built by the real ``make dist``, installed with pip (the normal index and
pip's cache for its dependencies, nothing borrowed from this checkout's venv) into a
brand-new venv, and every command then runs from a scratch directory with a clean
environment: if anything still looked for ``build/`` or ``examples/`` in a checkout, or
imported the checkout instead of the installed package, a command here would fail.
The plain install (a Spark worker's) runs the broker and the appliance; the load
generator says in one line that it needs ``appliance[loadgen]``, which is then added.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from appliance.process import process_group
from appliance.broker.ready_line import read_until_line
from appliance.process.logwatch import wait_for_event

ROOT = Path(__file__).resolve().parents[2]
KAFKA_CLIENTS_SHA256 = "7568b998572d256f0b7bc0afdc1b7a2588b8b08415c62ce314c864a6851ae9d9"
JARS = ("appliance/jars/appliance-kafka-connector.jar", "appliance/jars/kafka-clients-3.9.1.jar")

pytestmark = [pytest.mark.spark, pytest.mark.timeout(3000)]


def _clean_env() -> dict[str, str]:
    """No PYTHONPATH, no APPLIANCE_* settings, no venv of this checkout on PATH (the
    machine's own pip settings, proxies and JDK stay)."""
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "SPARK_HOME", "PYSPARK_PYTHON")
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith("APPLIANCE_")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(ROOT)))
    return env


@pytest.fixture(scope="module")
def wheel() -> Path:
    result = subprocess.run(["make", "dist", f"PY={sys.executable}"], cwd=ROOT,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    path = ROOT / "dist" / f"appliance-{version.group(1)}-py3-none-any.whl"
    assert path.is_file(), sorted((ROOT / "dist").glob("*"))
    return path


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A new venv holding the wheel and its declared dependencies (no extras), nothing
    else."""
    where = tmp_path_factory.mktemp("wheel-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    env = _clean_env()
    result = subprocess.run(
        [str(where / "bin" / "python"), "-m", "pip", "install", "--quiet",
         "--disable-pip-version-check", str(wheel)],
        cwd=where.parent, env=env, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return where


def test_wheel_holds_the_connector_jar_and_the_verified_kafka_clients_jar(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        assert set(JARS) <= names
        assert "appliance/examples/rules.yml" in names
        assert "appliance/py.typed" in names  # PEP 561: type checkers read the annotations
        digest = hashlib.sha256(zf.read(JARS[1])).hexdigest()
        with zf.open(JARS[0]) as jar, zipfile.ZipFile(jar) as connector:
            services = connector.read(
                "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister")
    assert digest == KAFKA_CLIENTS_SHA256
    assert b"io.appliance.kafka.ApplianceKafkaProvider" in services
    assert not any(n.startswith(("tests/", "bench/", "build/")) for n in names)


class Proc:
    """A CLI process of the venv in its own process group, output to a log file."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], log: Path):
        self.log = log
        self._out = log.open("ab")
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=self._out, stdin=subprocess.DEVNULL,
                                     start_new_session=True)

    def first_line(self, prefix: str, timeout: float) -> str:
        """The first stdout line starting with ``prefix`` (bounded wait)."""
        line, lines = read_until_line(self.proc.stdout, prefix, timeout)
        if line is None:
            raise AssertionError(f"no {prefix!r} line: {lines[-20:]!r}\n{self.tail()}")
        return line

    def wait_for_event(self, event: str, timeout: float) -> dict:
        return wait_for_event(self.log, event, self.proc, timeout, poll=0.3)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def stop(self, timeout: float = 240) -> int | None:
        process_group.stop(self.proc, grace=timeout)  # and the JVM left in its group
        self._out.close()
        return self.proc.returncode


def test_installed_wheel_runs_broker_appliance_and_loadgen_without_a_checkout(
        venv, wheel, tmp_path):
    bin_dir, env = venv / "bin", _clean_env()
    work = tmp_path / "work"
    work.mkdir()

    probe = subprocess.run(
        [str(bin_dir / "python"), "-c",
         "import json, sys, appliance, loadgen; from appliance import connector; "
         "from appliance.rules.rules_file import EXAMPLE_RULES; print(json.dumps({"
         "'appliance': appliance.__file__, 'loadgen': loadgen.__file__, "
         "'jars': connector.jars(), 'rules': str(EXAMPLE_RULES), 'path': sys.path}))"],
        cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    where = json.loads(probe.stdout)
    venv_root = str(venv.resolve())
    for path in [where["appliance"], where["loadgen"], where["rules"], *where["jars"]]:
        assert path.startswith(venv_root), (path, venv_root)
    assert not any(p.startswith(str(ROOT)) for p in where["path"] if p), where["path"]

    broker = Proc([str(bin_dir / "appliance"), "broker", "--port", "0",
                   "--topics", "events:2,alerts:1,events.dlq:1"], work, env,
                  tmp_path / "broker.log")
    appliance = None
    try:
        bootstrap = broker.first_line("broker ready bootstrap=", 300).split("=", 1)[1].strip()
        rules = work / "rules.yml"
        rules.write_bytes(Path(where["rules"]).read_bytes())  # the shipped example rules
        (work / "appliance.toml").write_text(f"""
[kafka]
bootstrap_servers = "{bootstrap}"
[query]
trigger = "continuous"
interval = "500 milliseconds"
checkpoint_dir = "checkpoint"
[rules]
path = "rules.yml"
[metrics]
port = 0
""")
        appliance = Proc([str(bin_dir / "appliance"), "run", "--config", "appliance.toml"],
                         work, env, tmp_path / "appliance.log")
        appliance.wait_for_event("appliance.ready", 900)
        appliance.wait_for_event("query.processing", 600)

        report = work / "load.json"
        loadgen = [str(bin_dir / "loadgen"), "run", "--bootstrap-server", bootstrap,
                   "--rate", "100", "--duration", "3s", "--floor-duration", "0",
                   "--grace", "90s", "--quiet", "--report", str(report)]
        lean = subprocess.run(loadgen, cwd=work, env=env, capture_output=True, text=True,
                              timeout=300)
        assert lean.returncode == 2, lean.stdout + lean.stderr
        assert lean.stderr.splitlines() == [
            "loadgen run: needs the loadgen extra (confluent-kafka, hdrhistogram, locust, "
            "matplotlib, numpy not installed): pip install 'appliance[loadgen]'"]
        extra = subprocess.run(
            [str(bin_dir / "python"), "-m", "pip", "install", "--quiet",
             "--disable-pip-version-check", f"{wheel}[loadgen]"],
            cwd=work, env=env, capture_output=True, text=True, timeout=1200)
        assert extra.returncode == 0, extra.stdout[-3000:] + extra.stderr[-3000:]
        load = subprocess.run(loadgen, cwd=work, env=env, capture_output=True, text=True,
                              timeout=900)
        assert load.returncode == 0, load.stdout + load.stderr + appliance.tail()
        result = json.loads(report.read_text())
        assert result["expected_alerts"] > 0
        assert result["received_alerts"] == result["expected_alerts"], result
        assert result["lost"] == 0
        assert appliance.stop() == 0, appliance.tail()
        appliance = None
    finally:
        if appliance is not None:
            appliance.stop()
        broker.stop()

