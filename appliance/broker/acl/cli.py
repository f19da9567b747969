"""``appliance broker-user acl add|list|remove``: the broker's ACLs, edited offline.

Like ``broker-user add`` (the users file), this edits a file, not a running broker:
``DATA_DIR/acls.json``, under the same lock the broker takes for CreateAcls/DeleteAcls,
so neither loses the other's change. A running broker applies the file on SIGHUP
(``systemctl reload``) or at its next start. The flags follow Kafka's ``kafka-acls``:

    appliance broker-user acl add --data-dir D --allow-principal User:appliance \\
        --operation READ --topic events
    appliance broker-user acl list --data-dir D [--principal User:appliance]
    appliance broker-user acl remove --data-dir D --principal User:appliance --topic events

Bad input exits 2 with one line naming the flag or the file and field.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from appliance.broker.acl.model import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    AclError,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    check_host,
    check_principal,
    make_binding,
)
from appliance.broker.acl.store import AclStore, AclStoreError


class UsageError(Exception):
    """A flag the command cannot use; the message names it."""


def _resources(args: argparse.Namespace, required: bool) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    if required and not out:
        raise UsageError("name a resource: --topic, --group, --cluster or --transactional-id")
    return out


def _operations(values: list[str], flag: str = "--operation") -> list[Operation]:
    out = []
    for v in values:
        try:
            out.append(Operation[v.upper().replace("-", "_")])
        except KeyError:
            names = ", ".join(o.name for o in Operation if o > Operation.ANY)
            raise UsageError(f"{flag}: {v!r} is not one of {names}") from None
    return out


def _store(args: argparse.Namespace) -> AclStore:
    if not Path(args.data_dir).is_dir():
        raise UsageError(f"--data-dir: {args.data_dir} is not a directory (the broker's "
                         f"--data-dir)")
    return AclStore(args.data_dir)


def _checked(check, value: str, flag: str) -> str:
    try:
        return check(value, flag)
    except AclError as exc:
        raise UsageError(str(exc)) from None


def _add(args: argparse.Namespace) -> int:
    store = _store(args)
    grants = [(Permission.ALLOW, p) for p in args.allow_principal]
    grants += [(Permission.DENY, p) for p in args.deny_principal]
    if not grants:
        raise UsageError("name who: --allow-principal or --deny-principal (e.g. User:alice)")
    operations = _operations(args.operation)
    if not operations:
        raise UsageError("name what: --operation (e.g. READ, WRITE, DESCRIBE, ALL)")
    pattern = PatternType[args.resource_pattern_type.upper()]
    new: list[AclBinding] = []
    for rtype, name in _resources(args, required=True):
        for permission, principal in grants:
            for op in operations:
                try:
                    new.append(make_binding(rtype, name, pattern, principal, args.host, op,
                                            permission))
                except AclError as exc:
                    raise UsageError(str(exc)) from None
    added: list[AclBinding] = []

    def change(current: list[AclBinding]) -> list[AclBinding]:
        added[:] = [b for b in dict.fromkeys(new) if b not in current]
        return current + added

    stored = store.update(change)
    for b in new:
        print(b.describe())
    # "N added": configuration management tells a change from a pass that found them all.
    print(f"broker-user acl: {len(added)} added, {len(set(new)) - len(added)} already "
          f"there", file=sys.stderr)
    _applied(store, len(stored))
    return 0


def _filters(args: argparse.Namespace) -> list[AclFilter]:
    principal = (_checked(check_principal, args.principal, "--principal")
                 if args.principal else None)
    host = _checked(check_host, args.host, "--host") if args.host else None
    ops = _operations(args.operation) or [Operation.ANY]
    pattern = (PatternType[args.resource_pattern_type.upper()]
               if args.resource_pattern_type else PatternType.ANY)
    resources: list[tuple[ResourceType, str | None]] = [
        *_resources(args, required=False)] or [(ResourceType.ANY, None)]
    return [AclFilter(rtype, name, pattern, principal, host, op, Permission.ANY)
            for rtype, name in resources for op in ops]


def _list(args: argparse.Namespace) -> int:
    store = _store(args)
    filters = _filters(args)
    for b in store.load():
        if any(f.matches(b) for f in filters):
            print(b.describe())
    return 0


def _remove(args: argparse.Namespace) -> int:
    store = _store(args)
    filters = _filters(args)
    if not (args.principal or args.operation or args.topic or args.group or args.cluster
            or args.transactional_id):
        raise UsageError("say which ACLs to remove: --principal, --operation or a resource "
                         "(there is no remove-all)")
    removed: list[AclBinding] = []

    def change(current: list[AclBinding]) -> list[AclBinding]:
        removed[:] = [b for b in current if any(f.matches(b) for f in filters)]
        return [b for b in current if b not in removed]

    stored = store.update(change)
    for b in removed:
        print(b.describe())
    _applied(store, len(stored))
    return 0


def _applied(store: AclStore, count: int) -> None:
    print(f"broker-user acl: {count} ACLs in {store.path}; a running broker applies them "
          f"on SIGHUP (systemctl reload) or restart", file=sys.stderr)


def _run(func):
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except (UsageError, AclStoreError) as exc:
            print(f"broker-user acl: {exc}", file=sys.stderr)
            return 2
    return run


def _resource_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", required=True, help="the broker's --data-dir")
    parser.add_argument("--topic", action="append", default=[],
                        help="a topic (repeatable; with --resource-pattern-type prefixed: "
                             "a name prefix; * : every topic)")
    parser.add_argument("--group", action="append", default=[],
                        help="a consumer group (repeatable)")
    parser.add_argument("--transactional-id", action="append", default=[],
                        help="a transactional id (repeatable)")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument("--operation", action="append", default=[],
                        help="READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, "
                             "DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE or ALL "
                             "(repeatable)")


_EXAMPLES = {
    "add": "appliance broker-user acl add --data-dir D --allow-principal User:appliance "
           "--operation READ --topic events",
    "list": "appliance broker-user acl list --data-dir D --principal User:appliance",
    "remove": "appliance broker-user acl remove --data-dir D --principal User:appliance "
              "--topic events",
}


def register(acl_parser: argparse.ArgumentParser) -> None:
    """``broker-user acl`` and its three commands."""
    acl_parser.description = (
        "The broker's ACLs in DATA_DIR/acls.json, edited offline under the broker's lock; "
        "a running broker applies them on SIGHUP or restart. Flags as Kafka's kafka-acls; "
        "bad input exits 2 with one line naming the flag.")
    acl_parser.epilog = "examples:\n" + "\n".join(f"  {line}" for line in _EXAMPLES.values())
    sub = acl_parser.add_subparsers(dest="acl_command", required=True, metavar="COMMAND")
    add = sub.add_parser("add", help="allow or deny principals operations on resources",
                         description="Allow or deny principals operations on resources; "
                                     "prints the ACLs, exit 0 or 2.",
                         epilog=f"examples:\n  {_EXAMPLES['add']}")
    _resource_flags(add)
    add.add_argument("--allow-principal", action="append", default=[],
                     help="a principal to allow, e.g. User:alice (repeatable)")
    add.add_argument("--deny-principal", action="append", default=[],
                     help="a principal to deny, e.g. User:mallory (repeatable)")
    add.add_argument("--host", default=WILDCARD, help="client IP the ACL applies to "
                                                      "(default * : any)")
    add.add_argument("--resource-pattern-type", choices=("literal", "prefixed"),
                     default="literal", help="prefixed: every resource whose name starts "
                                             "with the given one")
    add.set_defaults(func=_run(_add))
    for name, func, text in (("list", _list, "show ACLs (all, or those the flags match)"),
                             ("remove", _remove, "remove the ACLs the flags match")):
        p = sub.add_parser(name, help=text, description=f"{text[0].upper()}{text[1:]}; "
                                                          f"exit 0 or 2.",
                           epilog=f"examples:\n  {_EXAMPLES[name]}")
        _resource_flags(p)
        p.add_argument("--principal", default=None,
                       help="only the ACLs of this principal, e.g. User:alice")
        p.add_argument("--host", default=None, help="only the ACLs for this client IP")
        p.add_argument("--resource-pattern-type", choices=("literal", "prefixed"),
                       default=None, help="only literal or only prefixed resources")
        p.set_defaults(func=_run(func))
