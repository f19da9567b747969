"""Wire handlers of CreateAcls, DescribeAcls and DeleteAcls (what ``kafka-acls``,
``AdminClient.create_acls`` and friends call).

Changes go through the store first (``store``: the file is the truth, shared with
the offline ``appliance broker-user acl`` command) and are in force for the next request
once answered. Without an authorizer the three answer SECURITY_DISABLED, as Kafka does.
"""

from __future__ import annotations

from appliance.broker.acl import needs
from appliance.broker.acl.authorizer import Authorizer
from appliance.broker.acl.model import (
    CLUSTER_NAME,
    AclBinding,
    AclError,
    AclFilter,
    make_binding,
    make_filter,
)
from appliance.broker.acl.store import AclStore, AclStoreError
from appliance.broker.caller import Caller
from appliance.broker.wire import errors
from appliance.logs import get_logger

log = get_logger("appliance.broker")
NO_AUTHORIZER = ("this broker runs without an authorizer: start it with --authorizer acl "
                 "to use ACLs")


def _filter(f: dict) -> AclFilter:
    return make_filter(f["resource_type_filter"], f["resource_name_filter"],
                       f["pattern_type_filter"], f["principal_filter"], f["host_filter"],
                       f["operation"], f["permission_type"])


def _binding_fields(b: AclBinding) -> dict:
    return {"resource_type": int(b.resource_type), "resource_name": b.resource_name,
            "pattern_type": int(b.pattern_type), "principal": b.principal, "host": b.host,
            "operation": int(b.operation), "permission_type": int(b.permission)}


class AclApis:
    def __init__(self, authorizer: Authorizer, store: AclStore) -> None:
        self.authorizer = authorizer
        self.store = store

    def _refusal(self, caller: Caller, need: needs.Need) -> tuple[int, str] | None:
        """(error, message) when the request may not run at all, else None."""
        if not self.authorizer.enabled:
            return errors.SECURITY_DISABLED, NO_AUTHORIZER
        if not self.authorizer.allows(caller, need, CLUSTER_NAME):
            return errors.CLUSTER_AUTHORIZATION_FAILED, (
                f"{caller.principal} may not {need.operation.name} the cluster")
        return None

    def create_acls(self, version: int, req: dict, caller: Caller):
        creations = req["creations"]
        refused = self._refusal(caller, needs.CREATE_ACLS)
        if refused is not None:
            code, message = refused
            return {"throttle_time_ms": 0, "results": [
                {"error_code": code, "error_message": message} for _ in creations]}
        results: list[dict] = []
        new: list[AclBinding] = []
        for c in creations:
            try:
                b = make_binding(c["resource_type"], c["resource_name"],
                                 c["resource_pattern_type"], c["principal"], c["host"],
                                 c["operation"], c["permission_type"])
            except AclError as exc:
                results.append({"error_code": errors.INVALID_REQUEST,
                                "error_message": str(exc)})
                continue
            new.append(b)
            results.append({"error_code": errors.NONE, "error_message": None})
        if new:
            try:
                stored = self.store.update(
                    lambda current: current + [b for b in dict.fromkeys(new)
                                               if b not in current])
            except AclStoreError as exc:
                log.error("broker.acl_store_failed", error=str(exc))
                for r in results:
                    if r["error_code"] == errors.NONE:
                        r.update(error_code=errors.UNKNOWN_SERVER_ERROR,
                                 error_message=str(exc))
                return {"throttle_time_ms": 0, "results": results}
            self.authorizer.replace(stored)
            log.info("broker.acls_created", principal=caller.principal,
                     acls=[b.describe() for b in new])
        return {"throttle_time_ms": 0, "results": results}

    def describe_acls(self, version: int, req: dict, caller: Caller):
        out: dict[str, object] = {"throttle_time_ms": 0, "error_code": errors.NONE,
                                  "error_message": None, "resources": []}
        refused = self._refusal(caller, needs.DESCRIBE_ACLS)
        if refused is not None:
            out["error_code"], out["error_message"] = refused
            return out
        try:
            wanted = _filter(req)
        except AclError as exc:
            out.update(error_code=errors.INVALID_REQUEST, error_message=str(exc))
            return out
        grouped: dict[tuple, list[dict]] = {}
        for b in self.authorizer.bindings:
            if wanted.matches(b):
                grouped.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
                    {"principal": b.principal, "host": b.host, "operation": int(b.operation),
                     "permission_type": int(b.permission)})
        out["resources"] = [{"resource_type": int(rt), "resource_name": name,
                             "pattern_type": int(pt), "acls": acls}
                            for (rt, name, pt), acls in grouped.items()]
        return out

    def delete_acls(self, version: int, req: dict, caller: Caller):
        filters = req["filters"]
        refused = self._refusal(caller, needs.DELETE_ACLS)
        if refused is not None:
            code, message = refused
            return {"throttle_time_ms": 0, "filter_results": [
                {"error_code": code, "error_message": message, "matching_acls": []}
                for _ in filters]}
        parsed: list[AclFilter | AclError] = []
        for f in filters:
            try:
                parsed.append(_filter(f))
            except AclError as exc:
                parsed.append(exc)
        valid = [f for f in parsed if isinstance(f, AclFilter)]
        removed: list[AclBinding] = []

        def remove(current: list[AclBinding]) -> list[AclBinding]:
            removed[:] = [b for b in current if any(f.matches(b) for f in valid)]
            return [b for b in current if b not in removed]

        store_error = None
        if valid:
            try:
                self.authorizer.replace(self.store.update(remove))
            except AclStoreError as exc:
                log.error("broker.acl_store_failed", error=str(exc))
                store_error = str(exc)
        results = []
        for f in parsed:
            if isinstance(f, AclError):
                results.append({"error_code": errors.INVALID_REQUEST, "error_message": str(f),
                                "matching_acls": []})
            elif store_error is not None:
                results.append({"error_code": errors.UNKNOWN_SERVER_ERROR,
                                "error_message": store_error, "matching_acls": []})
            else:
                results.append({"error_code": errors.NONE, "error_message": None,
                                "matching_acls": [
                                    {"error_code": errors.NONE, "error_message": None,
                                     **_binding_fields(b)}
                                    for b in removed if f.matches(b)]})
        if removed and store_error is None:
            log.info("broker.acls_deleted", principal=caller.principal,
                     acls=[b.describe() for b in removed])
        return {"throttle_time_ms": 0, "filter_results": results}
