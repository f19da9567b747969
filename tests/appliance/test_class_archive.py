"""The driver JVM's class-data-sharing archive (appliance.process.class_archive): which archive a
config asks for, the option that reaches the driver JVM, and, for real, that the archive
``appliance class-archive build`` wrote (at ``make setup``) is mapped by the next
``appliance run``."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from appliance.config import Config, load_config
from appliance.config import write_config as write_config_file
from appliance.process import class_archive, process_group
from appliance.process.class_archive import with_archive
from appliance.process.class_archive_prune import prune
from appliance.process.logwatch import wait_for_event
from appliance.process.session import spark_conf as spark_conf_with

from support.child_env import child_env
from support.kafka_io import consume, produce

ROOT = Path(__file__).resolve().parents[2]
DRIVER_OPTS = "spark.driver.extraJavaOptions"


def test_option_added_only_when_there_is_an_archive_and_no_cds_choice():
    archive = Path("/x/driver.jsa")
    assert with_archive("-XX:+UseG1GC", archive) == \
        "-XX:+UseG1GC -XX:SharedArchiveFile=/x/driver.jsa"
    assert with_archive("", archive) == "-XX:SharedArchiveFile=/x/driver.jsa"
    assert with_archive("-XX:+UseG1GC", None) == "-XX:+UseG1GC"
    for own in ("-Xshare:off", "-XX:SharedArchiveFile=/mine.jsa",
                "-XX:ArchiveClassesAtExit=/out.jsa"):
        assert with_archive(own, archive) == own


def spark_conf(config: Config) -> dict[str, str]:
    """The conf a new driver gets: the archive resolved as the runner resolves it."""
    return spark_conf_with(config, class_archive.resolve(config.spark.class_archive))


@pytest.fixture
def accept_any(monkeypatch):
    """Stand-in files instead of real archives: skip the JVM check for these tests."""
    monkeypatch.setattr(class_archive, "verify", lambda path: None)


def test_auto_uses_this_installations_archive_once_built(tmp_path, monkeypatch, accept_any):
    monkeypatch.setenv(class_archive.DIR_ENV, str(tmp_path))
    config = Config()
    assert "SharedArchiveFile" not in spark_conf(config).get(DRIVER_OPTS, "")
    built = class_archive.default_archive()
    assert built is not None and built.parent == tmp_path
    built.write_bytes(b"x")
    options = spark_conf(config)[DRIVER_OPTS]
    assert options.endswith(f"-XX:SharedArchiveFile={built}")
    assert "-XX:+UseG1GC" in options  # the tuning's GC options stay
    off = Config.model_validate({"spark": {"class_archive": "off"}})
    assert "SharedArchiveFile" not in spark_conf(off)[DRIVER_OPTS]
    # The operator's own driver options win, and still get the archive.
    own = Config.model_validate({"spark": {DRIVER_OPTS: "-Xmx1g"}})
    assert spark_conf(own)[DRIVER_OPTS] == f"-Xmx1g -XX:SharedArchiveFile={built}"


def test_key_follows_the_jdk_and_spark_installation(monkeypatch, tmp_path):
    key = class_archive.install_key()
    assert key and len(key) == 16
    fake_home = tmp_path / "jdk"
    (fake_home / "bin").mkdir(parents=True)
    (fake_home / "bin" / "java").write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(fake_home))
    assert class_archive.install_key() not in (None, key)


def test_a_path_is_relative_to_the_config_file_and_must_exist(tmp_path, accept_any):
    (tmp_path / "appliance.toml").write_text('[spark]\nclass_archive = "jvm/driver.jsa"\n')
    config = load_config(tmp_path / "appliance.toml")
    assert config.spark.class_archive == str(tmp_path / "jvm" / "driver.jsa")
    assert "SharedArchiveFile" not in spark_conf(config)[DRIVER_OPTS]  # not built: none
    (tmp_path / "jvm").mkdir()
    (tmp_path / "jvm" / "driver.jsa").write_bytes(b"x")
    assert spark_conf(config)[DRIVER_OPTS].endswith(
        f"-XX:SharedArchiveFile={tmp_path / 'jvm' / 'driver.jsa'}")


def test_a_damaged_archive_is_rejected_not_handed_to_the_driver(tmp_path, capsys):
    """A truncated dynamic archive aborts every JVM that maps it (JDK 17): the real JVM
    check must catch it, and the driver must start without it."""
    java = class_archive.java_binary()
    whole = tmp_path / "small.jsa"
    dumped = subprocess.run([str(java), f"-XX:ArchiveClassesAtExit={whole}", "-cp",
                             str(tmp_path), "-version"], capture_output=True, timeout=120)
    assert dumped.returncode == 0 and whole.stat().st_size > 0, dumped.stderr
    assert class_archive.verify(whole) is None
    cut = tmp_path / "cut.jsa"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    problem = class_archive.verify(cut)
    assert problem and "exited" in problem
    config = Config.model_validate({"spark": {"class_archive": str(cut)}})
    assert "SharedArchiveFile" not in spark_conf(config)[DRIVER_OPTS]
    assert "class_archive.rejected" in capsys.readouterr().out
    assert class_archive.resolve(str(whole)) == whole


def test_blank_setting_is_a_config_error(tmp_path):
    (tmp_path / "appliance.toml").write_text('[spark]\nclass_archive = " "\n')
    proc = subprocess.run([sys.executable, "-m", "appliance", "run", "--config",
                           str(tmp_path / "appliance.toml")], capture_output=True, text=True,
                          timeout=120, env=child_env())
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "spark.class_archive" in lines[0], proc.stderr


def _installation(root: Path, version: str) -> class_archive.Installation:
    """A stand-in JDK, pyspark install and connector jar under ``root`` (files only,
    nothing runs)."""
    (root / "jdk" / "bin").mkdir(parents=True, exist_ok=True)
    (root / "jdk" / "bin" / "java").write_text("#!/bin/sh\n")
    (root / "pyspark").mkdir(exist_ok=True)
    (root / "pyspark" / "version.py").write_text(f'__version__: str = "{version}"\n')
    (root / "connector.jar").write_bytes(b"PK jar")
    found = class_archive.installation_at(root / "jdk" / "bin" / "java", root / "pyspark",
                                          [root / "connector.jar"])
    assert found is not None and found.spark_version == version
    return found


def _archive(directory: Path, built_for: class_archive.Installation | None,
             key: str | None = None) -> Path:
    archive = directory / f"driver-{key or built_for.key}.jsa"
    archive.write_bytes(b"archive")
    if built_for is not None:
        class_archive.record_path(archive).write_text(json.dumps(dataclasses.asdict(built_for)))
    return archive


def test_prune_removes_exactly_the_archives_whose_installation_is_gone_or_changed(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    live = _archive(cache, _installation(tmp_path / "live", "4.3.0"))
    upgraded_install = _installation(tmp_path / "upgraded", "4.3.0")
    upgraded = _archive(cache, upgraded_install)
    (tmp_path / "upgraded" / "pyspark" / "version.py").write_text('__version__ = "4.4.0"\n')
    deleted = _archive(cache, _installation(tmp_path / "deleted", "4.3.0"))
    shutil.rmtree(tmp_path / "deleted")
    rebuilt = _archive(cache, _installation(tmp_path / "rebuilt", "4.3.0"))
    (tmp_path / "rebuilt" / "connector.jar").write_bytes(b"PK a rebuilt connector jar")
    keyless = dataclasses.replace(_installation(tmp_path / "keyless", "4.3.0"), jars="",
                                  jars_stamp="")  # a record from before jars were keyed
    old_record = _archive(cache, keyless)
    unknown = _archive(cache, None, key="0123456789abcdef")
    other = cache / "notes.txt"
    other.write_text("not an archive")

    planned = {v.archive.name: (v.removed, v.reason) for v in prune(cache, dry_run=True)}
    assert {name: removed for name, (removed, _) in planned.items()} == {
        live.name: False, upgraded.name: True, deleted.name: True, rebuilt.name: True,
        old_record.name: True, unknown.name: False}
    assert "4.3.0 -> 4.4.0" in planned[upgraded.name][1]
    assert "connector jars" in planned[rebuilt.name][1]
    assert "built before" in planned[old_record.name][1]
    assert "gone" in planned[deleted.name][1]
    assert "no record" in planned[unknown.name][1]
    assert all(p.exists() for p in (live, upgraded, deleted, unknown))  # a dry run

    prune(cache)
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        [live.name, class_archive.record_path(live).name, unknown.name, other.name])


def test_prune_cli_reports_each_archive(tmp_path):
    _archive(tmp_path, None, key="0123456789abcdef")
    gone = _archive(tmp_path, _installation(tmp_path / "gone", "4.3.0"))
    shutil.rmtree(tmp_path / "gone")
    proc = subprocess.run([sys.executable, "-m", "appliance", "class-archive", "prune"],
                          capture_output=True, text=True, timeout=120,
                          env={**child_env(), class_archive.DIR_ENV: str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    # One line per archive, in the cache's name order; the removed archive's name is
    # derived from its (temporary) installation path, so either line may come first.
    lines = sorted(proc.stdout.strip().splitlines(), key=lambda line: "removed" in line)
    assert len(lines) == 2
    assert lines[0].startswith("class-archive: kept ") and "no record" in lines[0]
    assert lines[1].startswith(f"class-archive: removed {gone}") and "gone" in lines[1]
    assert not gone.exists()


def test_this_installations_archive_is_described_by_the_key_it_is_named_by():
    found = class_archive.installation()
    assert found is not None and found.key == class_archive.install_key()
    assert found.spark_version == pyspark.__version__
    assert found.jar_paths() == list(class_archive.DRIVER_JARS)


def test_a_rebuilt_connector_jar_names_another_archive(tmp_path):
    """The JVM maps no archive whose class path's jars changed; so a rebuilt connector
    must look for (and ``build --if-missing`` make) an archive of its own."""
    before = _installation(tmp_path, "4.3.0")
    jar = tmp_path / "connector.jar"
    jar.write_bytes(b"PK the connector, rebuilt")
    after = class_archive.installation_at(Path(before.java), Path(before.spark_home), [jar])
    assert after is not None and after.key != before.key
    jar.unlink()
    assert class_archive.installation_at(Path(before.java), Path(before.spark_home),
                                         [jar]) is None


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_built_archive_is_mapped_by_the_next_run_which_still_alerts(tmp_path, broker):
    """The archive ``make setup`` built with ``appliance class-archive build --if-missing``
    (every `make test` runs it first, so the build command itself is exercised there: a
    failing build fails the set-up), named by path in a config."""
    archive = class_archive.default_archive()
    assert archive is not None and archive.is_file(), \
        f"no class archive at {archive}: `make setup` builds it (appliance class-archive build)"
    assert archive.stat().st_size > 1 << 20
    assert not list(archive.parent.glob("class-archive-*"))  # the build's scratch dir went
    record = json.loads(class_archive.record_path(archive).read_text())
    assert class_archive.Installation(**record) == class_archive.installation()

    topics = {"events": "ca-events", "alerts": "ca-alerts", "dead_letters": "ca-dlq"}
    broker.create_topics({"ca-events": 2, "ca-alerts": 1, "ca-dlq": 1})
    rules = tmp_path / "rules.yml"
    rules.write_text("rules:\n  - id: hot\n    severity: critical\n"
                     "    when: \"value > 90\"\n    message: hot\n")
    config = write_config_file(Config.model_validate({
        "kafka": {"bootstrap_servers": broker.bootstrap}, "topics": topics,
        "query": {"checkpoint_dir": str(tmp_path / "checkpoint")},
        "rules": {"path": str(rules)},
        "spark": {"class_archive": str(archive)}, "metrics": {"port": 0},
    }), tmp_path / "appliance.toml")
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "appliance", "run", "--config",
                                 str(config)], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, env=child_env())
    try:
        assert wait_for_event(log, "spark.ready", proc, 600)["class_archive"] == str(archive)
        wait_for_event(log, "appliance.ready", proc, 600)
        # The JVM accepted the archive: it keeps the file mapped (a rejected one is not).
        mapped = [pid for pid in process_group.live_members(proc.pid) if str(archive) in _maps(pid)]
        assert mapped, f"no process of group {proc.pid} maps {archive}"
        produce(broker.bootstrap, topics["events"], [
            json.dumps({"event_id": "ca-1", "ts": 1732200000123.5, "source": "h1",
                        "metric": "cpu", "value": 99.0}).encode(),
            json.dumps({"event_id": "ca-2", "ts": 1732200000123.5, "source": "h1",
                        "metric": "cpu", "value": 9.0}).encode()])
        alerts = consume(broker.bootstrap, topics["alerts"], 1, 120)
        got = [json.loads(v) for _k, v in alerts]
        assert [(a["alert_id"], [r["id"] for r in a["rules"]]) for a in got] \
            == [("ca-1", ["hot"])]
    finally:
        process_group.stop(proc, grace=90, whole_group=True)


def _maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""
