"""``appliance broker --metrics-port``: broker_* metrics count what clients really did."""

from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from appliance.broker import EmbeddedBroker
from appliance.broker.wire import schemas
from appliance.broker.wire.client import WireClient

from support.scrape import samples as scrape_samples


def test_metrics_count_requests_errors_bytes_latency_and_offsets(tmp_path):
    with EmbeddedBroker(extra_args=["--metrics-port", "0"], topics={"m-events": 2},
                        log_path=tmp_path / "broker.log", start_timeout=300) as broker:
        assert broker.metrics_url and broker.metrics_url.startswith("http://127.0.0.1:")
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, linger_ms=0)
        for i in range(5):
            producer.send("m-events", value=b"x" * 10, partition=i % 2).get(timeout=30)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                                 enable_auto_commit=False, auto_offset_reset="earliest")
        consumer.assign([TopicPartition("m-events", 0)])
        got = consumer.poll(timeout_ms=5000)
        assert sum(len(v) for v in got.values()) >= 1
        with WireClient(broker.bootstrap) as client:  # a Metadata request that fails
            meta = client.request(schemas.METADATA, 9, {
                "topics": [{"name": "no-such-topic"}], "allow_auto_topic_creation": False})
        assert meta["topics"][0]["error_code"] == 3
        samples = scrape_samples(broker.metrics_url)
        consumer.close()
    requests = {labels: v for (name, labels), v in samples.items()
                if name == "broker_requests_total"}
    assert requests[(("api", "Produce"), ("error", "NONE"))] == 5
    assert requests.get((("api", "Fetch"), ("error", "NONE")), 0) >= 1
    assert any(dict(labels).get("error") == "UNKNOWN_TOPIC_OR_PARTITION"
               for labels in requests), requests
    produce_count = samples[("broker_request_latency_seconds_count", (("api", "Produce"),))]
    assert produce_count == 5
    assert samples[("broker_request_latency_seconds_bucket",
                    (("api", "Produce"), ("le", "+Inf")))] == 5
    assert samples[("broker_bytes_in_total", ())] > 50
    assert samples[("broker_bytes_out_total", ())] > 50
    assert samples[("broker_connections_opened_total", ())] >= 2
    assert samples[("broker_connections", ())] >= 1
    ends = {dict(labels)["partition"]: v for (name, labels), v in samples.items()
            if name == "broker_log_end_offset" and dict(labels)["topic"] == "m-events"}
    assert ends == {"0": 3.0, "1": 2.0}


def test_no_metrics_port_serves_nothing_and_prints_no_url(tmp_path):
    with EmbeddedBroker(log_path=tmp_path / "broker.log", start_timeout=300) as broker:
        assert broker.metrics_url is None


def test_group_metrics_members_state_committed_offset_and_lag(tmp_path):
    from kafka import OffsetAndMetadata

    args = ["--metrics-port", "0", "--group-initial-rebalance-delay-ms", "0"]
    with EmbeddedBroker(extra_args=args, topics={"g-events": 2},
                        log_path=tmp_path / "broker.log", start_timeout=300) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1)
        for i in range(8):
            producer.send("g-events", value=b"x", partition=0 if i < 5 else 1).get(timeout=30)
        producer.close()
        consumer = KafkaConsumer("g-events", bootstrap_servers=broker.bootstrap,
                                 group_id="alert-forwarder", enable_auto_commit=False,
                                 session_timeout_ms=6000, heartbeat_interval_ms=1000)
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        consumer.commit({TopicPartition("g-events", 0): OffsetAndMetadata(2, "", -1),
                         TopicPartition("g-events", 1): OffsetAndMetadata(3, "", -1)})
        active = scrape_samples(broker.metrics_url)
        consumer.close()
        idle = scrape_samples(broker.metrics_url)
    group = (("group", "alert-forwarder"),)
    assert active[("broker_group_members", group)] == 1
    assert active[("broker_group_state", (*group, ("state", "Stable")))] == 1
    assert active[("broker_group_state", (*group, ("state", "Empty")))] == 0
    assert active[("broker_group_generation", group)] >= 1
    assert active[("broker_group_rebalances_total", group)] >= 1

    def per_partition(samples, name):
        return {dict(labels)["partition"]: v for (n, labels), v in samples.items()
                if n == name and dict(labels)["group"] == "alert-forwarder"}

    assert per_partition(active, "broker_group_committed_offset") == {"0": 2.0, "1": 3.0}
    assert per_partition(active, "broker_group_lag") == {"0": 3.0, "1": 0.0}
    assert idle[("broker_group_members", group)] == 0
    assert idle[("broker_group_state", (*group, ("state", "Empty")))] == 1
    assert per_partition(idle, "broker_group_lag") == {"0": 3.0, "1": 0.0}


def test_kip848_consumer_groups_have_the_same_group_metrics(tmp_path):
    import uuid

    args = ["--metrics-port", "0"]
    with EmbeddedBroker(extra_args=args, topics={"k-events": 2},
                        log_path=tmp_path / "broker.log", start_timeout=300) as broker, \
            WireClient(broker.bootstrap) as c:
        member_id = str(uuid.uuid4())
        joined = c.request(schemas.CONSUMER_GROUP_HEARTBEAT, 1, {
            "group_id": "kip848-forwarder", "member_id": member_id, "member_epoch": 0,
            "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 5000,
            "subscribed_topic_names": ["k-events"], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []})
        assert joined["error_code"] == 0
        c.request(schemas.OFFSET_COMMIT, 9, {
            "group_id": "kip848-forwarder", "generation_id": joined["member_epoch"],
            "member_id": member_id, "group_instance_id": None, "topics": [
                {"name": "k-events", "partitions": [
                    {"partition_index": 0, "committed_offset": 0,
                     "committed_leader_epoch": -1, "committed_metadata": None}]}]})
        got = scrape_samples(broker.metrics_url)
    group = (("group", "kip848-forwarder"),)
    assert got[("broker_group_members", group)] == 1
    assert got[("broker_group_generation", group)] == joined["member_epoch"]
    assert got[("broker_group_state", (*group, ("state", "Stable")))] == 1
    assert got[("broker_group_state", (*group, ("state", "Reconciling")))] == 0
    assert [v for (name, labels), v in got.items()
            if name == "broker_group_committed_offset"
            and dict(labels) == {"group": "kip848-forwarder", "topic": "k-events",
                                 "partition": "0"}] == [0]
