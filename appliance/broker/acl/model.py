"""ACL bindings and filters, with Kafka's numbering and matching rules.

The enum values are Kafka's wire codes (``AclOperation``, ``ResourceType``,
``PatternType``, ``AclPermissionType``), so a binding travels unchanged between the
CreateAcls/DescribeAcls/DeleteAcls messages, the store and the authorizer. ``ANY`` and
``MATCH`` exist only in filters; a binding always names a concrete value.
"""

from __future__ import annotations

import enum
import ipaddress
from typing import NamedTuple, TypeVar

WILDCARD = "*"  # a resource name or host matching every one
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name, as in Kafka
ANONYMOUS = "User:ANONYMOUS"  # a connection that did not authenticate


class AclError(ValueError):
    """A binding or filter that cannot be used; the message names the field."""


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filter: any pattern type, the name matched exactly
    MATCH = 2  # filter: every binding that applies to the named resource
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# Kafka: an ALLOW of any of these operations also allows the key (never a DENY: denying
# READ does not deny DESCRIBE).
IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE,
                                   Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS,
                                           Operation.ALTER_CONFIGS}),
}

# What a binding may hold: no filter-only values, and only what this broker can name.
BINDING_RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                          ResourceType.TRANSACTIONAL_ID)
BINDING_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
BINDING_OPERATIONS = tuple(op for op in Operation if op > Operation.ANY)
BINDING_PERMISSIONS = (Permission.DENY, Permission.ALLOW)


class AclBinding(NamedTuple):
    """One rule: ``principal`` from ``host`` is ``permission`` to ``operation`` on the
    resources of ``resource_type`` named ``resource_name`` (``pattern_type``)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def describe(self) -> str:
        return (f"{self.permission.name} {self.principal}@{self.host} "
                f"{self.operation.name} {self.resource_type.name}:"
                f"{self.pattern_type.name}:{self.resource_name}")


E = TypeVar("E", bound=enum.IntEnum)


def _enum(kind: type[E], value, field: str, allowed) -> E:
    member: E | None
    try:
        member = kind[value.upper()] if isinstance(value, str) else kind(value)
    except (KeyError, ValueError):
        member = None
    if member is None or member not in allowed:
        names = ", ".join(m.name for m in allowed)
        raise AclError(f"{field}: {value!r} is not one of {names}")
    return member


def check_principal(principal, field: str = "principal") -> str:
    if not isinstance(principal, str) or ":" not in principal or principal.endswith(":") \
            or principal.startswith(":"):
        raise AclError(f"{field}: {principal!r} is not TYPE:NAME (e.g. User:alice, User:*)")
    return principal


def check_host(host, field: str = "host") -> str:
    if host == WILDCARD:
        return host
    try:
        ipaddress.ip_address(host)
    except (TypeError, ValueError):
        raise AclError(f"{field}: {host!r} is not '*' or an IP address") from None
    return host


def make_binding(resource_type, resource_name, pattern_type, principal, host, operation,
                 permission) -> AclBinding:
    """A validated binding from names (``"TOPIC"``) or codes (``2``); AclError names the
    field that is wrong."""
    rtype = _enum(ResourceType, resource_type, "resource_type", BINDING_RESOURCE_TYPES)
    if not isinstance(resource_name, str) or not resource_name:
        raise AclError(f"resource_name: {resource_name!r} must be a non-empty string")
    if rtype is ResourceType.CLUSTER and resource_name != CLUSTER_NAME:
        raise AclError(f"resource_name: the cluster resource is named {CLUSTER_NAME!r}, "
                       f"not {resource_name!r}")
    ptype = _enum(PatternType, pattern_type, "pattern_type", BINDING_PATTERN_TYPES)
    if ptype is PatternType.PREFIXED and resource_name == WILDCARD:
        raise AclError("resource_name: '*' is a literal wildcard; a PREFIXED pattern "
                       "must not be '*'")
    return AclBinding(
        rtype, resource_name, ptype, check_principal(principal), check_host(host),
        _enum(Operation, operation, "operation", BINDING_OPERATIONS),
        _enum(Permission, permission, "permission", BINDING_PERMISSIONS))


class AclFilter(NamedTuple):
    """Which bindings DescribeAcls and DeleteAcls mean: ``None`` and the ``ANY`` values
    match everything; ``PatternType.MATCH`` matches every binding that applies to the
    named resource (literal name, the ``*`` wildcard, or a prefix of it)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and b.resource_type != self.resource_type:
            return False
        if not self._name_matches(b):
            return False
        if self.principal is not None and b.principal != self.principal:
            return False
        if self.host is not None and b.host != self.host:
            return False
        if self.operation is not Operation.ANY and b.operation != self.operation:
            return False
        return self.permission is Permission.ANY or b.permission == self.permission

    def _name_matches(self, b: AclBinding) -> bool:
        pt, name = self.pattern_type, self.resource_name
        if pt is PatternType.MATCH:
            if name is None:
                return True
            if b.pattern_type is PatternType.LITERAL:
                return b.resource_name in (name, WILDCARD)
            return name.startswith(b.resource_name)
        if pt is not PatternType.ANY and b.pattern_type != pt:
            return False
        return name is None or b.resource_name == name


def make_filter(resource_type, resource_name, pattern_type, principal, host, operation,
                permission) -> AclFilter:
    """A validated filter from wire codes; AclError names the field that is wrong.

    The principal and host are matched as given, as Kafka reads them: a filter is not a
    binding (``*`` as a principal matches bindings whose principal is ``*``, none when
    they are all ``TYPE:NAME``, and is no error)."""
    return AclFilter(
        _enum(ResourceType, resource_type, "resource_type",
              (ResourceType.ANY, *BINDING_RESOURCE_TYPES)),
        resource_name,
        _enum(PatternType, pattern_type, "pattern_type",
              (PatternType.ANY, PatternType.MATCH, *BINDING_PATTERN_TYPES)),
        principal,
        host,
        _enum(Operation, operation, "operation", (Operation.ANY, *BINDING_OPERATIONS)),
        _enum(Permission, permission, "permission", (Permission.ANY, *BINDING_PERMISSIONS)))


def resource_matches(b: AclBinding, resource_type: ResourceType, name: str) -> bool:
    """Does binding ``b`` apply to the resource ``resource_type:name``?"""
    if b.resource_type != resource_type:
        return False
    if b.pattern_type is PatternType.LITERAL:
        return b.resource_name == name or b.resource_name == WILDCARD
    return name.startswith(b.resource_name)
