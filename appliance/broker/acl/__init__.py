"""Authorization in Kafka's model: who (principal, host) may do what (operation) to which
resource (topic, group, cluster, transactional id, by literal name or name prefix).

Why a room: the model (``model``), the decision (``authorizer``), the table of what each
API needs (``needs``) and the durable store (``store``) are one concept the wire handlers
above consult; they know nothing of connections or handlers themselves. The ACL admin
APIs (``apis``: CreateAcls, DescribeAcls, DeleteAcls) and the offline editor (``cli``:
``appliance broker-user acl``) live here too: both change the store, under its lock.
"""
