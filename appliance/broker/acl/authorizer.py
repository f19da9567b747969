"""The decision: may this caller do this operation on this resource? Kafka's semantics.

- Super users (``--super-users``) may do everything; nobody else may do anything no
  binding allows (deny by default).
- A binding applies when its principal is the caller's or ``User:*``, its host the
  caller's IP or ``*``, and its resource pattern covers the resource (the literal name,
  the literal ``*``, or a prefix of the name).
- DENY wins: one applying DENY of the operation (or ALL) refuses, whatever allows it.
- An ALLOW of the operation or ALL allows; READ, WRITE, DELETE and ALTER also allow
  DESCRIBE, and ALTER_CONFIGS allows DESCRIBE_CONFIGS (``model.IMPLIED_BY``).

With the authorizer off (``--authorizer none``, the default) every request is allowed,
as before ACLs existed. Decisions are cached per (principal, host, operation, resource)
until the bindings change: a produce then costs one dict lookup per topic.
"""

from __future__ import annotations

from collections import defaultdict

from appliance.broker.acl.model import (
    IMPLIED_BY,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    resource_matches,
)
from appliance.broker.acl.needs import Need
from appliance.broker.caller import Caller
from appliance.broker.settings import AuthorizerKind
from appliance.logs import get_logger

log = get_logger("appliance.broker")
_CACHE_LIMIT = 50_000  # decisions kept; cleared when full (a new one costs microseconds)


class Authorizer:
    def __init__(self, kind: AuthorizerKind, super_users: tuple[str, ...] = (),
                 bindings: list[AclBinding] | None = None) -> None:
        self.enabled = kind is AuthorizerKind.ACL
        self.super_users = frozenset(super_users)
        self.bindings: list[AclBinding] = []
        self._by_type: dict[ResourceType, list[AclBinding]] = {}
        self._cache: dict[tuple, bool] = {}
        # (api name, resource type name) -> denials that were logged, for broker metrics
        self.denials: dict[tuple[str, str], int] = {}
        self.replace(bindings or [])

    def replace(self, bindings: list[AclBinding]) -> None:
        """Take a new set of bindings (from the store) into force at once."""
        by_type: dict[ResourceType, list[AclBinding]] = defaultdict(list)
        for b in bindings:
            by_type[b.resource_type].append(b)
        self.bindings = list(bindings)
        self._by_type = dict(by_type)
        self._cache = {}

    # -- decisions ------------------------------------------------------------------------

    def allows(self, caller: Caller, need: Need, name: str) -> bool:
        """Does ``caller`` meet ``need`` on the resource ``name``? A denial of an audited
        need is logged (``broker.authorization_denied``) and counted."""
        if not self.enabled:
            return True
        key = (caller.principal, caller.host, need.operation, need.resource_type, name)
        allowed = self._cache.get(key)
        if allowed is None:
            allowed = self._decide(caller.principal, caller.host, need.operation,
                                   need.resource_type, name)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = allowed
        if not allowed and need.audit:
            self._denied(caller, need, need.resource_type, name)
        return allowed

    def allows_any(self, caller: Caller, need: Need) -> bool:
        """Does some binding allow ``need``'s operation on some resource of its type, not
        cancelled by a DENY (Kafka's authorizeByResourceType, KIP-679: an idempotent
        producer needs WRITE on some topic, not IDEMPOTENT_WRITE on the cluster)?"""
        if not self.enabled or caller.principal in self.super_users:
            return True
        op = need.operation
        applying = [b for b in self._by_type.get(need.resource_type, ())
                    if self._applies(b, caller.principal, caller.host)
                    and b.operation in (op, Operation.ALL)]
        denies = [b for b in applying if b.permission is Permission.DENY]
        if any(d.pattern_type is PatternType.LITERAL and d.resource_name == WILDCARD
               for d in denies):
            allowed = False
        else:
            allowed = any(b.permission is Permission.ALLOW and not any(
                _covers(d, b) for d in denies) for b in applying)
        if not allowed and need.audit:
            self._denied(caller, need, need.resource_type, "*")
        return allowed

    def authorized_operations(self, caller: Caller, resource_type: ResourceType, name: str,
                              candidates: tuple[Operation, ...]) -> int:
        """The bit set of ``candidates`` the caller may do (Kafka's *authorized_operations*
        fields); nothing is logged."""
        if not self.enabled or caller.principal in self.super_users:
            return sum(1 << op for op in candidates)
        return sum(1 << op for op in candidates
                   if self._decide(caller.principal, caller.host, op, resource_type, name))

    def _decide(self, principal: str, host: str, op: Operation, rtype: ResourceType,
                name: str) -> bool:
        if principal in self.super_users:
            return True
        applying = [b for b in self._by_type.get(rtype, ())
                    if self._applies(b, principal, host) and resource_matches(b, rtype, name)]
        if any(b.permission is Permission.DENY and b.operation in (op, Operation.ALL)
               for b in applying):
            return False
        granting = IMPLIED_BY.get(op, frozenset({op}))
        return any(b.permission is Permission.ALLOW
                   and (b.operation is Operation.ALL or b.operation in granting)
                   for b in applying)

    @staticmethod
    def _applies(b: AclBinding, principal: str, host: str) -> bool:
        return (b.principal == principal or b.principal == WILDCARD_PRINCIPAL) and (
            b.host == host or b.host == WILDCARD)

    def _denied(self, caller: Caller, need: Need, rtype: ResourceType, name: str) -> None:
        key = (need.api.name, rtype.name)
        self.denials[key] = self.denials.get(key, 0) + 1
        log.info("broker.authorization_denied", principal=caller.principal, host=caller.host,
                 api=need.api.name, operation=need.operation.name, resource_type=rtype.name,
                 resource_name=name)


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Does ``deny`` deny every resource ``allow`` allows?"""
    if deny.pattern_type is PatternType.LITERAL:
        return deny.resource_name == WILDCARD or (
            allow.pattern_type is PatternType.LITERAL
            and allow.resource_name == deny.resource_name)
    return allow.resource_name.startswith(deny.resource_name) and (
        allow.resource_name != WILDCARD or allow.pattern_type is PatternType.PREFIXED)
