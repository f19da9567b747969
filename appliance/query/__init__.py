"""The streaming query: what the appliance computes.

The event shape (``events``), the alert rules (``rules``), the DataFrame transformation
(``pipeline``), the start-up warm-up of that exact plan (``warmup``), and the query's
checkpoint (``checkpoint``, ``epoch_watch``). Nothing here starts a process or serves
metrics; ``appliance.process`` does, using these.
"""
