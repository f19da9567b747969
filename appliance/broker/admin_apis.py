"""Wire handlers of the configs and DeleteRecords APIs (what admin tools call).

DescribeConfigs answers from ``topic_configs``' tables: a topic's own value (source
DYNAMIC_TOPIC_CONFIG) or the broker's (STATIC_BROKER_CONFIG when a flag set it, else
DEFAULT_CONFIG), with the broker-level synonym when asked. IncrementalAlterConfigs (SET,
DELETE, APPEND, SUBTRACT) and the older AlterConfigs (replace all) change a topic's configs
as a whole, validated first, in force at once. Broker configs are read-only: altering one
is refused with INVALID_REQUEST, as Kafka refuses a config it cannot change at run time.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping

from appliance.broker.acl import needs
from appliance.broker.acl.authorizer import Authorizer
from appliance.broker.acl.model import CLUSTER_NAME
from appliance.broker.caller import Caller
from appliance.broker.settings import BrokerConfig
from appliance.broker.storage import topic_configs
from appliance.broker.storage.topic_configs import ConfigSource, ResourceType, TopicConfigError
from appliance.broker.storage.topic_registry import TopicRegistry, TopicRegistryError
from appliance.broker.wire import errors


class AlterOp(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


BROKER_READ_ONLY = ("broker configs are read-only on this broker: restart `appliance broker` "
                    "with other flags")


def _entry(name: str, value: str | None, read_only: bool, source: ConfigSource,
           config_type: int, doc: str, synonyms: list[dict], with_synonyms: bool,
           with_docs: bool) -> dict:
    return {"name": name, "value": value, "read_only": read_only,
            "config_source": int(source), "is_default": source is ConfigSource.DEFAULT_CONFIG,
            "is_sensitive": False, "synonyms": synonyms if with_synonyms else [],
            "config_type": config_type, "documentation": doc if with_docs else None}


class AdminApis:
    def __init__(self, config: BrokerConfig, registry: TopicRegistry,
                 authorizer: Authorizer,
                 endpoint: Callable[[], tuple[str, int]] = lambda: ("127.0.0.1", 9092)
                 ) -> None:
        self.config = config
        self.registry = registry
        self.authorizer = authorizer
        self.endpoint = endpoint  # the advertised (host, port): known once listening

    def _denied(self, caller: Caller, rtype: int, name: str, topic_need: needs.Need,
                broker_need: needs.Need) -> dict | None:
        """The error fields of a resource the caller may not touch, else None (types
        other than topics and the broker are refused later, as unserved)."""
        if rtype == ResourceType.TOPIC:
            need, resource = topic_need, name
        elif rtype == ResourceType.BROKER:
            need, resource = broker_need, CLUSTER_NAME
        else:
            return None
        if self.authorizer.allows(caller, need, resource):
            return None
        return {"error_code": need.error,
                "error_message": f"{caller.principal} may not {need.operation.name} "
                                 f"{'the broker' if resource == CLUSTER_NAME else repr(name)}"}

    # -- DescribeConfigs ------------------------------------------------------------------

    def _topic_configs(self, name: str, keys, with_synonyms: bool,
                       with_docs: bool) -> list[dict]:
        topic = self.registry.topics[name]
        out = []
        for spec in topic_configs.TOPIC_CONFIGS:
            if keys is not None and spec.name not in keys:
                continue
            default = spec.default(self.config)
            default_source = spec.default_source(self.config)
            synonyms = []
            own = topic.configs.get(spec.name) if spec.live else None
            if own is not None:
                synonyms.append({"name": spec.name, "value": own,
                                 "source": int(ConfigSource.DYNAMIC_TOPIC_CONFIG)})
            if spec.broker_synonym:
                synonyms.append({"name": spec.broker_synonym, "value": default,
                                 "source": int(default_source)})
            if own is None:
                value, source = default, default_source
            else:
                value, source = own, ConfigSource.DYNAMIC_TOPIC_CONFIG
            out.append(_entry(spec.name, value, not spec.live, source, int(spec.type), spec.doc,
                              synonyms, with_synonyms, with_docs))
        return out

    def _broker_configs(self, keys, with_synonyms: bool, with_docs: bool) -> list[dict]:
        out = []
        facts = topic_configs.BrokerFacts(self.config, *self.endpoint())
        for s in topic_configs.BROKER_SETTINGS:
            if keys is not None and s.name not in keys:
                continue
            value, source = s.value(facts), s.source(facts)
            out.append(_entry(s.name, value, True, source, int(s.type), s.doc,
                              [{"name": s.name, "value": value, "source": int(source)}],
                              with_synonyms, with_docs))
        return out

    def _broker_name_error(self, name: str) -> str | None:
        if name in ("", str(self.config.node_id)):
            return None
        return f"this broker's id is {self.config.node_id}, not {name!r}"

    def describe_configs(self, version: int, req: dict, caller: Caller):
        results = []
        for r in req["resources"]:
            rtype, name = r["resource_type"], r["resource_name"]
            keys = set(r["configuration_keys"]) if r["configuration_keys"] is not None else None
            res = {"error_code": errors.NONE, "error_message": None, "resource_type": rtype,
                   "resource_name": name, "configs": []}
            denied = self._denied(caller, rtype, name, needs.DESCRIBE_CONFIGS_TOPIC,
                                  needs.DESCRIBE_CONFIGS_BROKER)
            if denied is not None:
                res.update(denied)
            elif rtype == ResourceType.TOPIC:
                if name in self.registry.topics:
                    res["configs"] = self._topic_configs(name, keys,
                                                         req["include_synonyms"],
                                                         req["include_documentation"])
                else:
                    res.update(error_code=errors.UNKNOWN_TOPIC_OR_PARTITION,
                               error_message=f"unknown topic {name!r}")
            elif rtype == ResourceType.BROKER:
                problem = self._broker_name_error(name)
                if problem is None:
                    res["configs"] = self._broker_configs(keys,
                                                          req["include_synonyms"],
                                                          req["include_documentation"])
                else:
                    res.update(error_code=errors.INVALID_REQUEST, error_message=problem)
            else:
                res.update(error_code=errors.INVALID_REQUEST,
                           error_message=f"resource type {rtype} is not served (topics: 2, "
                                         f"the broker: 4)")
            results.append(res)
        return {"throttle_time_ms": 0, "results": results}

    # -- altering -------------------------------------------------------------------------

    def _alter(self, rtype: int, name: str, compute, validate_only: bool,
               denied: dict | None) -> dict:
        """``compute(current configs) -> new configs``; raises TopicConfigError."""
        res = {"error_code": errors.NONE, "error_message": None, "resource_type": rtype,
               "resource_name": name}
        try:
            if denied is not None:
                res.update(denied)
            elif rtype == ResourceType.BROKER:
                problem = self._broker_name_error(name)
                res.update(error_code=errors.INVALID_REQUEST,
                           error_message=problem or BROKER_READ_ONLY)
            elif rtype != ResourceType.TOPIC:
                res.update(error_code=errors.INVALID_REQUEST,
                           error_message=f"resource type {rtype} has no configs here")
            elif name not in self.registry.topics:
                res.update(error_code=errors.UNKNOWN_TOPIC_OR_PARTITION,
                           error_message=f"unknown topic {name!r}")
            else:
                current = dict(self.registry.topics[name].configs)
                self.registry.alter_configs(name, compute(current), validate_only)
        except TopicConfigError as exc:
            res.update(error_code=errors.INVALID_CONFIG, error_message=str(exc))
        except TopicRegistryError as exc:
            res.update(error_code=exc.code, error_message=exc.message)
        return res

    def incremental_alter_configs(self, version: int, req: dict, caller: Caller):
        out = []
        for r in req["resources"]:
            def compute(current: dict[str, str], ops=r["configs"]) -> Mapping[str, str | None]:
                for c in ops:
                    name, value = c["name"], c["value"]
                    spec = topic_configs.spec(name)
                    try:
                        op = AlterOp(c["config_operation"])
                    except ValueError:
                        raise TopicConfigError(f"{name}: unknown operation "
                                          f"{c['config_operation']}") from None
                    if op is AlterOp.SET:
                        current[name] = value
                    elif op is AlterOp.DELETE:
                        current.pop(name, None)
                    elif spec.type is not topic_configs.ConfigType.LIST:
                        raise TopicConfigError(f"{name}: {op.name} needs a list config")
                    else:
                        items = [v for v in (current.get(name) or spec.default(
                            self.config)).split(",") if v]
                        given = [v.strip() for v in (value or "").split(",") if v.strip()]
                        items = (items + [v for v in given if v not in items]
                                 if op is AlterOp.APPEND else
                                 [v for v in items if v not in given])
                        current[name] = ",".join(items)
                return current
            out.append(self._alter(r["resource_type"], r["resource_name"], compute,
                                   req["validate_only"], self._denied(
                                       caller, r["resource_type"], r["resource_name"],
                                       needs.INCREMENTAL_ALTER_CONFIGS_TOPIC,
                                       needs.INCREMENTAL_ALTER_CONFIGS_BROKER)))
        return {"throttle_time_ms": 0, "responses": out}

    def alter_configs(self, version: int, req: dict, caller: Caller):
        out = []
        for r in req["resources"]:
            def compute(current: dict[str, str], given=r["configs"]) -> dict[str, str | None]:
                return {c["name"]: c["value"] for c in given}  # all others: defaults
            out.append(self._alter(r["resource_type"], r["resource_name"], compute,
                                   req["validate_only"], self._denied(
                                       caller, r["resource_type"], r["resource_name"],
                                       needs.ALTER_CONFIGS_TOPIC, needs.ALTER_CONFIGS_BROKER)))
        return {"throttle_time_ms": 0, "responses": out}

    # -- DeleteRecords --------------------------------------------------------------------

    def delete_records(self, version: int, req: dict, caller: Caller):
        topics = []
        for t in req["topics"]:
            parts = []
            allowed = self.authorizer.allows(caller, needs.DELETE_RECORDS, t["name"])
            for p in t["partitions"]:
                index, offset = p["partition_index"], p["offset"]
                partition = self.registry.partition(t["name"], index)
                out = {"partition_index": index, "low_watermark": -1,
                       "error_code": errors.NONE}
                if not allowed:
                    out["error_code"] = errors.TOPIC_AUTHORIZATION_FAILED
                elif partition is None:
                    out["error_code"] = errors.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    if offset == -1:  # Kafka: up to the high watermark
                        offset = partition.high_watermark
                    if not 0 <= offset <= partition.high_watermark:
                        out["error_code"] = errors.OFFSET_OUT_OF_RANGE
                    else:
                        out["low_watermark"] = partition.delete_records(offset)
                parts.append(out)
            topics.append({"name": t["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}
