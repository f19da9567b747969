"""The adaptive read limit (``maxOffsetsPerTrigger=auto``) and the micro-batch stream's
time-driven paths: the PID estimator's unit checks and the stream's checks with an injected
clock run as Java programs (tests/connector/java, compiled with javac: no JUnit here), then a
real streaming query reads a backlog in adaptively sized batches."""

from __future__ import annotations

import pytest
from test_connector_source_options import drain, source

from support.connector.connector_helpers import produce, rows_as_recs

pytestmark = [pytest.mark.spark, pytest.mark.java]

ESTIMATOR_CHECKS = [
    "initial_limit_is_initial_rate_times_target",
    "initial_rate_never_below_min_rate",
    "proportional_step_moves_rate_to_processing_rate",
    "overrun_lowers_rate_below_processing_rate",
    "derivative_term_uses_error_change_per_second",
    "min_rate_floor",
    "empty_or_unmeasured_batches_leave_rate_alone",
    "converges_to_target_duration_on_backlog",
    "ramps_up_from_min_rate_within_a_few_batches",
    "slowdown_shrinks_batches",
    "non_finite_result_falls_back_to_min_rate",
]

STREAM_CHECKS = [
    "min_offsets_wait_until_max_trigger_delay_expires",
    "adaptive_limit_follows_measured_batches",
    "adaptive_limit_ends_a_batch_at_the_next_trigger_without_metrics",
    "initial_offsets_file_uses_the_sessions_hadoop_conf",
]


@pytest.fixture(scope="module")
def estimator_results(connector_java_checks):
    return connector_java_checks.run("RateEstimatorCheck")


@pytest.fixture(scope="module")
def stream_results(connector_java_checks, broker, tmp_path_factory):
    small, big = "mbcheck-small", "mbcheck-big"
    suffix = tmp_path_factory.mktemp("mb").name  # unique per session
    small, big = f"{small}-{suffix}", f"{big}-{suffix}"
    broker.create_topics({small: 1, big: 2})
    produce(broker.bootstrap, small, "s", 5, partitions=1)
    produce(broker.bootstrap, big, "b", 3000, partitions=2)
    work = tmp_path_factory.mktemp("mbwork")
    # the umask reaches Hadoop only as a spark.hadoop.* setting of the session; no file
    # system cache, so the store cannot be handed a file system someone else configured
    return connector_java_checks.submit(
        "MicroBatchStreamCheck", broker.bootstrap, small, big, str(work),
        conf={"spark.hadoop.fs.permissions.umask-mode": "077",
              "spark.hadoop.fs.file.impl.disable.cache": "true"})


@pytest.mark.parametrize("check", ESTIMATOR_CHECKS)
def test_rate_estimator(estimator_results, check):
    assert estimator_results.get(check) == "PASS", estimator_results.get(check, "not run")


def test_every_estimator_check_is_listed(estimator_results):
    assert set(estimator_results) == set(ESTIMATOR_CHECKS)


@pytest.mark.parametrize("check", STREAM_CHECKS)
def test_micro_batch_stream_with_injected_clock(stream_results, check):
    assert stream_results.get(check) == "PASS", stream_results.get(check, "not run")


def test_every_stream_check_is_listed(stream_results):
    assert set(stream_results) == set(STREAM_CHECKS)


def test_auto_limit_reads_a_backlog_in_adaptive_batches_without_loss(spark, broker, new_topic,
                                                                     checkpoint, queries):
    """The first batch reads the initial rate x the target; every later batch at most the
    limit the estimator reported after the batch before it, and that limit moves (up on a
    quiet machine, down to the floor's side on a crowded one: the floor, 50/s x 5 s, is
    below the initial 1000, so a few batches drain the backlog either way)."""
    topic = new_topic(2)
    sent = produce(broker.bootstrap, topic, "auto", 2000)
    rows, q = drain(source(spark, broker, subscribe=topic, startingOffsets="earliest",
                           maxOffsetsPerTrigger="auto", adaptiveInitialOffsetsPerSecond="200",
                           adaptiveMinOffsetsPerSecond="50", adaptiveTargetBatchDuration="5s"),
                    checkpoint, queries, timeout_s=600)
    assert sorted(rows_as_recs(rows), key=lambda r: r.value) == sorted(sent, key=lambda r: r.value)
    batches = [p for p in q.recentProgress if p["numInputRows"] > 0]
    assert batches[0]["numInputRows"] == 1000  # the initial rate x the target duration
    limits = [int(p["sources"][0]["metrics"]["adaptiveOffsetsPerTrigger"]) for p in batches]
    for limit, batch in zip(limits, batches[1:], strict=False):
        assert batch["numInputRows"] <= limit
    assert all(limit >= 250 for limit in limits)  # never below the floor
    assert limits[0] != 1000, "the limit did not adapt to the first batch"
    assert sum(p["numInputRows"] for p in batches) == 2000


@pytest.mark.parametrize("options, named", [
    ({"maxOffsetsPerTrigger": "auto", "adaptiveIntegralGain": "-1"}, "adaptiveIntegralGain"),
    ({"maxOffsetsPerTrigger": "auto", "adaptiveTargetBatchDuration": "soon"},
     "adaptiveTargetBatchDuration"),
    ({"maxOffsetsPerTrigger": "auto", "adaptiveMinOffsetsPerSecond": "0"},
     "adaptiveMinOffsetsPerSecond"),
    ({"maxOffsetsPerTrigger": "100", "adaptiveProportionalGain": "1"}, "adaptiveProportionalGain"),
    ({"maxOffsetsPerTrigger": "automatic"}, "maxOffsetsPerTrigger"),
])
def test_bad_adaptive_option_fails_at_load_naming_it(spark, options, named):
    reader = (spark.readStream.format("appliance-kafka")
              .option("kafka.bootstrap.servers", "127.0.0.1:1").option("subscribe", "t"))
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception, match=f"'{named}'"):  # noqa: B017 - a PySparkException
        reader.load()
