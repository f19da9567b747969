"""Transactions (KIP-98, KIP-447): the coordinator of every transactional id on this one
broker, its durable state, and the transaction APIs' handlers. What a partition knows of
transactions (its open ones, its aborted ones, its last stable offset) is the storage's
(``storage.partition_txns``); the markers' bytes are the wire's (``wire.control_batch``).
"""
