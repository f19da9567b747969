"""Authorization in Kafka's model: who (principal, host) may do what (operation) to which
resource (topic, group, cluster, transactional id, by literal name or name prefix).

Why a sub-package: the model (``model``), the decision (``authorizer``), the table of what
each API needs (``rules``) and the durable store (``store``) are one concept the wire
handlers above consult; they know nothing of connections or handlers themselves.
"""
