"""The Kafka headers an alert record carries besides its JSON value.

Part of the alert's contract with its readers: the in-band latency observer
(``appliance.observability.alert_latency``) reads them, the pipeline writes them. Kept in a
leaf of its own so the query does not import the observability layer above it.
"""

SOURCE_TIMESTAMP_HEADER = "appliance.source.timestamp"  # the event record's, ASCII epoch ms
SEVERITY_HEADER = "appliance.severity"  # the alert's highest matched severity
