"""The appliance as a process: its lifecycle and the JVMs it starts.

The runner (start, serve, reload, stop), the Spark session and its class-data-sharing
archive, task slots, restarts in place, and the child
processes' groups and logs. It drives ``appliance.query`` and ``appliance.observability``.
"""
