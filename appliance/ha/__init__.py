"""An active/standby pair of ``appliance run`` processes (``[ha]``): never serve from a
JVM that just started, never leave the events unread while one starts.

Each instance starts Spark, compiles the rules and warms the query's plan up, then joins
a Kafka consumer group (``[ha] group``) on a one-partition control topic: the member
Kafka's group protocol assigns that partition is the active one and starts the query,
the others wait warm (``election``). The active commits the events topic's processed
offsets to the same group after the sink committed them, and an instance that takes over
starts from those (``kafka_offsets``); each instance keeps its own checkpoint beneath
``[query] checkpoint_dir`` (``instance``). ``ha_metrics`` exports the role and takeovers.
"""
