"""The Kafka headers an alert record carries besides its JSON value.

Part of the alert's contract with its readers: the in-band latency observer
(``appliance.observability.alert_latency``) reads the first two, a consumer may route or
filter on the rules version without parsing the JSON, and the pipeline writes them all. Kept in a
leaf of its own so the query does not import the observability layer above it.
"""

SOURCE_TIMESTAMP_HEADER = "appliance.source.timestamp"  # the event record's, ASCII epoch ms
SEVERITY_HEADER = "appliance.severity"  # the alert's highest matched severity
RULES_VERSION_HEADER = "appliance.rules.version"  # the rules_version that raised it
