"""Authentication: what each listener demands of a connection, and proving who it is.

``listener`` (Kafka's four security protocols, checked before the broker listens) builds
on ``tls`` (the server SSLContext from PEM files) and ``sasl`` (the per-connection gate:
PLAIN and SCRAM-SHA-256/512), which checks against ``credentials`` (the users file of
salted ``scram`` credentials); PLAIN's password derivations run in ``password_pool``'s
worker processes, off the event loop. Who may then do what is the ``acl`` room's job.
"""
