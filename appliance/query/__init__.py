"""The streaming query: what the appliance computes with its rules.

The DataFrame transformation (``pipeline``), the one builder of its streaming queries
(``stream_query``), the start-up warm-up of that exact plan (``warmup``), the query's
checkpoint (``checkpoint``, ``epoch_watch``) and an alert record's headers
(``alert_headers``). The rules it evaluates are ``appliance.rules``, imported downward;
the event's shape is ``appliance.events``. Nothing here starts a process or serves
metrics; ``appliance.process`` does, using these.
"""
