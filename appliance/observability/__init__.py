"""What the appliance tells operators while it runs: Prometheus metrics and the in-band
alert-latency histogram. (Structured logging is ``appliance.logs``, a leaf every layer
uses, the broker included.)"""
