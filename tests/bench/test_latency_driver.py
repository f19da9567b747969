"""The latency bench's Java driver (``bench.appliance_latency.Driver``) against a real broker.

The driver must warm itself where the product under test cannot see it (its own topic),
send nothing on the measured topic until it is told GO, and then account for every alert.
The JVM passthrough relay stands in for the appliance: no Spark needed to test the driver.
"""

from __future__ import annotations

import subprocess
import uuid

from confluent_kafka import Consumer, TopicPartition

from bench._java import compile_driver
from bench.appliance_latency import DRIVER_WARMUP_S, Driver, java_command

RATE = 1000
SECONDS = 2


def _records(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{uuid.uuid4()}"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in range(partitions))
    finally:
        consumer.close()


def test_driver_warms_on_its_own_topic_and_sends_only_after_go(broker, tmp_path):
    cp = compile_driver("AlertLatencyBench.java")
    tag = f"drv-{uuid.uuid4().hex[:8]}"
    topics = {"events": f"{tag}-events", "alerts": f"{tag}-alerts", "dead_letters": f"{tag}-dlq"}
    broker.create_topics({topics["events"]: 2, topics["alerts"]: 1})
    relay = None
    try:
        with Driver(cp, broker, topics, RATE, SECONDS, 2, tmp_path) as driver:
            warm = int(RATE * DRIVER_WARMUP_S)
            assert driver.warm_line == f"WARM {warm}/{warm}"   # it read back all it sent
            assert _records(broker.bootstrap, f"{topics['events']}-driver-warmup", 2) == warm
            assert _records(broker.bootstrap, topics["events"], 2) == 0   # nothing before GO

            relay = subprocess.Popen(java_command(cp, "relay", broker.bootstrap,
                                                  topics["events"], topics["alerts"], "120"),
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
            assert relay.stdout.readline().strip() == "READY"
            result = driver.measure()
    finally:
        if relay is not None:
            relay.kill()
            relay.wait(timeout=30)

    print(f"\ndriver: sent {result['sent']}, alerts {result['alerts_received']}/"
          f"{result['alerts_expected']}, p50 {result['latency_ms']['p50']} ms")
    assert result["sent"] == RATE * SECONDS
    assert _records(broker.bootstrap, topics["events"], 2) == RATE * SECONDS
    assert result["alerts_expected"] == RATE * SECONDS // 10
    assert result["alerts_lost"] == 0 and result["alerts_received"] == RATE * SECONDS // 10
    assert [s["count"] for s in result["per_second"]] == [RATE // 10] * SECONDS
    assert 0 < result["cpu_busy"] <= 1   # the machine's share busy while measured
