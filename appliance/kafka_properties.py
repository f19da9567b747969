"""Kafka client properties in ``appliance.toml`` checked against Kafka's own names.

``[kafka]`` hands every key but the appliance's own (``bootstrap_servers``,
``embedded_port``) to the Kafka clients, and ``[source]``/``[sink]`` hand their ``kafka.``
keys to the connector's consumer/producer. A name no client knows used to be ignored by
all of them without a word: ``bootstrap_server = "kafka-1:9092"`` left the appliance on its
embedded broker. Now a key is one of

- the appliance's own keys;
- a property of the Java producer, consumer or admin client of the kafka-clients version
  the wheel ships (``appliance.kafka_names``, generated from the jar), its value of the
  property's type where that is a number or a boolean;
- a librdkafka spelling of a credential or CA that ``client_security`` translates;

and anything else is a problem naming the closest valid name. Properties the appliance sets
itself (``bootstrap.servers``, the serializers, where the query starts...) are refused with
the reason, rather than silently losing to (or overriding) the appliance's own value.

Standard library only (plus the generated table): ``appliance config check`` needs no JVM.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import NamedTuple

from appliance.client_security import RDKAFKA_ONLY
from appliance.kafka_names import KAFKA_CLIENTS_VERSION, PROPERTIES

#: ``[kafka]``'s own keys (appliance.config.KafkaConfig's fields).
OWN_KEYS = ("bootstrap_servers", "embedded_port")
_BOOTSTRAP = "bootstrap_servers"

class Refused(NamedTuple):
    """A property the appliance sets itself: why, and what to set instead (if anything)."""

    why: str
    instead: str | None = None


#: Properties every client of the appliance gets from the appliance itself.
SET_BY_APPLIANCE = {
    "bootstrap.servers": Refused("every client gets bootstrap_servers, or the embedded "
                                 "broker's address", "bootstrap_servers"),
}
#: The connector's consumer: what it sets itself (connector SourceOptions).
SET_BY_SOURCE = {
    "auto.offset.reset": Refused("where the query starts is its own setting",
                                 "[query] starting_offsets"),
    "key.deserializer": Refused("keys are always read as bytes"),
    "value.deserializer": Refused("values are always read as bytes"),
    "enable.auto.commit": Refused("the query keeps its offsets in its checkpoint, not in Kafka"),
    "interceptor.classes": Refused("interceptors would see records out of the source's "
                                   "control"),
}
#: The connector's producer: what it sets itself (connector SinkOptions).
SET_BY_SINK = {
    "key.serializer": Refused("alert keys are always written as bytes"),
    "value.serializer": Refused("alert values are always written as bytes"),
}

_INTEGER = re.compile(r"^\s*-?\d+\s*$")
_NUMBER = re.compile(r"^\s*-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$")
_TYPE_WORDS = {"INT": "an integer", "SHORT": "an integer", "LONG": "an integer",
               "DOUBLE": "a number", "BOOLEAN": "true or false"}


class PropertyProblem(NamedTuple):
    """One key that cannot be handed to Kafka."""

    key: str
    message: str  # without the key, and without the suggestion
    suggestion: str | None = None  # the closest valid name, as the section spells it
    refused: bool = False  # a property the appliance sets itself

    def said(self, suggestion: str | None = None) -> str:
        """The message with the suggestion (``suggestion``: another spelling of it, e.g.
        the variable that sets it)."""
        name = suggestion or self.suggestion
        if name is None:
            return self.message
        return f"{self.message}: set {name} instead" if self.refused \
            else f"{self.message} (did you mean {name}?)"


def _normal(name: str) -> str:
    return name.lower().replace("_", ".").replace("-", ".")


def _value_problem(kafka_type: str, value: object) -> str | None:
    """What is wrong with ``value`` for a property of ``kafka_type`` (None: nothing)."""
    if kafka_type not in _TYPE_WORDS:
        return None
    if kafka_type == "BOOLEAN":
        ok = isinstance(value, bool) or str(value).strip().lower() in ("true", "false")
    elif isinstance(value, bool):
        ok = False
    elif kafka_type == "DOUBLE":
        ok = isinstance(value, int | float) or bool(_NUMBER.match(str(value)))
    else:
        ok = isinstance(value, int) or bool(_INTEGER.match(str(value)))
    if ok:
        return None
    return f"must be {_TYPE_WORDS[kafka_type]} (Kafka's {kafka_type}) (got {value!r})"


class SectionNames(NamedTuple):
    """What one section accepts: valid names and the refused ones."""

    valid: frozenset[str]
    refused: Mapping[str, Refused]
    prefix: str  # "kafka." in [source]/[sink]: the part of the key that is the connector's
    what: str  # "Kafka client property", "Kafka consumer property"...


def _names_for(clients: tuple[str, ...], refused: Mapping[str, Refused],
               own: tuple[str, ...], prefix: str = "") -> SectionNames:
    valid = {name for name, prop in PROPERTIES.items()
             if any(c in prop.clients for c in clients)} - set(refused)
    if prefix:  # the connector's options: Java's names only
        return SectionNames(frozenset(valid), refused, prefix, f"Kafka {clients[0]} property")
    return SectionNames(frozenset(valid | set(RDKAFKA_ONLY) | set(own)), refused, prefix,
                  "Kafka client property")


def _elsewhere(refused: Mapping[str, Refused]) -> dict[str, Refused]:
    """``refused`` as a section without ``bootstrap_servers`` words it ([source], [sink])."""
    return {name: r._replace(instead=f"[kafka] {r.instead}") if r.instead == "bootstrap_servers"
            else r for name, r in refused.items()}


#: [kafka]: every client (the connector's consumer and producer, the appliance's admin).
KAFKA_SECTION = _names_for(("producer", "consumer", "admin"),
                           {**SET_BY_APPLIANCE, **SET_BY_SOURCE, **SET_BY_SINK}, OWN_KEYS)
#: [source]'s ``kafka.`` keys: the connector's consumer (and its offset lookups' admin).
SOURCE_SECTION = _names_for(("consumer", "admin"),
                            _elsewhere({**SET_BY_APPLIANCE, **SET_BY_SOURCE}), (), "kafka.")
#: [sink]'s ``kafka.`` keys: the connector's producer.
SINK_SECTION = _names_for(("producer",), _elsewhere({**SET_BY_APPLIANCE, **SET_BY_SINK}), (),
                          "kafka.")


def closest(name: str, names: SectionNames) -> str | None:
    """The valid name ``name`` most likely meant, as the section would spell it, or None."""
    candidates = {_normal(valid): names.prefix + valid for valid in names.valid}
    candidates.update((_normal(refused), r.instead) for refused, r in names.refused.items()
                      if r.instead is not None)
    candidates.update((_normal(own), own) for own in OWN_KEYS if own in names.valid)
    match = difflib.get_close_matches(_normal(name), list(candidates), n=1, cutoff=0.8)
    return candidates[match[0]] if match else None


def check_properties(props: Mapping[str, object],
                     names: SectionNames = KAFKA_SECTION) -> list[PropertyProblem]:
    """Every key of ``props`` (one section's keys, the appliance's own included) that is
    not a valid one, in the section's order."""
    problems = []
    for key, value in props.items():
        if names.prefix:
            if not key.startswith(names.prefix):
                continue  # a connector option of its own (maxOffsetsPerTrigger...)
            name = key[len(names.prefix):]
        else:
            name = key
        refused = names.refused.get(name)
        if refused is not None:
            problems.append(PropertyProblem(key, f"set by the appliance, not here "
                                                 f"({refused.why})", refused.instead, True))
        elif name not in names.valid:
            problems.append(PropertyProblem(
                key, f"not a {names.what} (kafka-clients {KAFKA_CLIENTS_VERSION})",
                closest(name, names)))
        elif name in PROPERTIES and (wrong := _value_problem(PROPERTIES[name].type, value)):
            problems.append(PropertyProblem(key, wrong))
    return problems
