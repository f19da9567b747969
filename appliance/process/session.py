"""Build the SparkSession from config: master, connector jars and the tuning defaults.

The ``[spark]`` section's ``spark.*`` keys win over ``tuning.py`` so an operator can
override one setting without editing code. The driver's class-data-sharing archive
(``appliance.process.class_archive``), when the caller resolved one, is added to whichever driver
JVM options result; resolving it is left to the caller because it runs a JVM to check the
file, which only a start of a new driver needs.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

from pyspark.sql import SparkSession

from appliance import logs
from appliance.config import Config
from appliance.connector import driver_jvm, spark_jars_conf
from appliance.process.class_archive import with_archive
from appliance.process.jvm_log import quiet_continuous_stop, with_log_options
from appliance.tuning import LOCAL_CHECKPOINT_CONF, Tuning, sql_settings, tuning_for


def is_local_path(path: str) -> bool:
    """A plain path or a ``file:`` URI (not ``hdfs://``, ``s3a://``...)."""
    scheme = path.split(":", 1)[0] if "://" in path or path.startswith("file:") else ""
    return scheme in ("", "file")


def spark_conf(config: Config, class_archive: Path | None = None,
               tuning: Tuning | None = None) -> dict[str, str]:
    """Every Spark conf the appliance sets, tuning first, then the operator's overrides,
    and ``class_archive`` (a checked archive, ``class_archive.resolve``) for the driver.
    ``tuning``: the run's (``RunSettings.tuning``), else the config's trigger's."""
    if tuning is None:
        tuning = tuning_for(config.query.mode, config.query.async_progress)
    conf = dict(tuning.spark_conf)
    conf.update(spark_jars_conf())
    if is_local_path(config.query.checkpoint_dir):
        conf.update(LOCAL_CHECKPOINT_CONF)
    if config.spark.master.startswith("local"):
        # Local runs talk over loopback only, whatever the host name resolves to. On a
        # cluster the executors must reach the driver: there Spark's own defaults (the
        # host name, random ports) apply unless [spark] driver_host etc. say otherwise.
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    conf.update(config.spark.driver_conf)
    conf.update(config.spark.conf)
    key = "spark.driver.extraJavaOptions"
    options = with_archive(conf.get(key, ""), class_archive)
    if options:
        conf[key] = options
    return conf


def build_session(config: Config, app_name: str = "appliance",
                  class_archive: Path | None = None,
                  tuning: Tuning | None = None) -> SparkSession:
    builder = SparkSession.builder.master(config.spark.master).appName(app_name)
    # The JVM's log lines follow this process's log output (appliance.process.jvm_log).
    output = logs.output()
    conf = with_log_options(spark_conf(config, class_archive, tuning), output)
    for key, value in conf.items():
        builder = builder.config(key, value)
    sigint = signal.getsignal(signal.SIGINT)
    spark = builder.getOrCreate()
    if sigint is not None and threading.current_thread() is threading.main_thread():
        # SparkContext replaces the SIGINT handler with its own (cancel every job, raise
        # KeyboardInterrupt wherever the main thread is); the caller's way of stopping
        # on Ctrl-C stays in force.
        signal.signal(signal.SIGINT, sigint)
    spark.sparkContext.setLogLevel("WARN")
    quiet_continuous_stop(driver_jvm(spark), output)
    return spark


def generated_classes(spark: SparkSession) -> int:
    """How many classes Spark's code generator has compiled in this driver JVM so far.

    Its cache is keyed by the generated source text, so planning code that was generated
    before compiles nothing: a query started after the warm-up should add none (the
    runner logs the difference as ``appliance.ready``'s ``query_new_classes``)."""
    metrics = driver_jvm(spark).org.apache.spark.metrics.source.CodegenMetrics
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


def apply_sql_settings(session: SparkSession, conf: dict[str, str]) -> None:
    """Set ``conf``'s SQL settings on ``session``, a child session sharing a JVM (tests,
    bench, a shared session): the static ones only a new SparkContext takes stay the JVM's."""
    for key, value in sql_settings(conf).items():
        try:
            session.conf.set(key, value)
        except Exception:  # noqa: BLE001 - a static conf: pyspark raises its own kinds
            pass
