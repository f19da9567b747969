"""The appliance as a process: its lifecycle and the JVMs it starts.

The runner (start, serve, stop, in order) and the pieces it starts: the run's settings
worked out once, its Kafka and topics, the rules and their live reload, the Spark session
and its class-data-sharing archive, the query's warm-up and start, task slots, restarts in
place, the metrics, an ``[ha]`` pair's turns, and the child processes' groups and logs.
It drives ``appliance.query`` (over ``appliance.rules``) and ``appliance.observability``.
"""
