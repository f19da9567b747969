"""Low-latency Kafka monitoring appliance on Apache Spark."""

__version__ = "0.1.0"
