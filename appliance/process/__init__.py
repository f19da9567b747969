"""The appliance as a process: its lifecycle and the JVMs it starts.

The runner (start, serve, reload, stop), the Spark session and its class-data-sharing
archive, a local standalone cluster, task slots, restarts in place, and the child
processes' groups and logs. It drives ``appliance.query`` (over ``appliance.rules``) and
``appliance.observability``.
"""
