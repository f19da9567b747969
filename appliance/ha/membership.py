"""Is this member still in the pair's group? The coordinator's own list says.

The active's lease is its offset commits (``election``). While the group rebalances, a
consumer cannot commit: kafka-python refuses on the client side once it knows a rebalance
is under way, and Kafka refuses a member whose group is completing one. A rebalance can
last as long as its slowest member takes to rejoin (a starting partner whose host is busy
with its JVM: seconds, up to the rebalance timeout), longer than a 2 s session, and the
client stops heartbeating while its JoinGroup waits. Counted as silence, that fenced a
healthy active every time a slow partner joined. A client-side "rebalance in progress"
alone proves nothing (the client may have lost Kafka after it learned of the rebalance),
so the lease asks the coordinator instead: DescribeGroups lists the group's members,
and while this member is listed the partition cannot have gone to another one (the
assignor keeps it with its newest owner, and the coordinator removes a member only by
a leave, a lapsed session or a missed rebalance). The lease then runs from the moment the
question was sent.

Only asked while commits fail for a rebalance: Kafka unreachable fails the commit
differently, and the lease lapses as before.
"""

from __future__ import annotations

from kafka import KafkaAdminClient

from appliance import logs

log = logs.get_logger("appliance.ha")


class MembershipProbe:
    """``listed(member_id)``: True when the coordinator lists that member in ``group``,
    False when it answered without it, None when it could not be asked."""

    def __init__(self, client_config: dict, group: str, timeout_ms: int) -> None:
        known = set(KafkaAdminClient.DEFAULT_CONFIG)
        self._config = {**{k: v for k, v in client_config.items() if k in known},
                        "request_timeout_ms": timeout_ms, "client_id": f"{group}-lease"}
        self.group = group
        self._admin: KafkaAdminClient | None = None

    def listed(self, member_id: str) -> bool | None:
        if not member_id:
            return None
        try:
            if self._admin is None:
                self._admin = KafkaAdminClient(**self._config)
            found = self._admin.describe_groups([self.group]).get(self.group) or {}
        except Exception as exc:  # noqa: BLE001 - not asked: the lease decides without it
            log.debug("ha.membership_unknown", error=" ".join(str(exc).split())[:300])
            self.close()
            return None
        if found.get("error"):
            return None
        return any(m.get("member_id") == member_id for m in found.get("members") or ())

    def close(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception:  # noqa: BLE001 - closing a client that failed
                pass
