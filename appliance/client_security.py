"""One set of Kafka security settings, spoken in each client's dialect.

The operator writes them once, in ``[kafka]`` of ``appliance.toml`` (or ``APPLIANCE_KAFKA_*``
environment variables), as Java client properties - the connector's own language:

```toml
[kafka]
bootstrap_servers = "broker:9093"
"security.protocol" = "SASL_SSL"
"sasl.mechanism" = "SCRAM-SHA-512"
"sasl.username" = "appliance"         # or sasl.jaas.config, as for any Java client
"sasl.password" = "..."               # better: APPLIANCE_KAFKA_SASL_PASSWORD in the env
"ssl.truststore.type" = "PEM"
"ssl.truststore.location" = "/etc/appliance/ca.pem"
```

librdkafka's spelling is accepted too (``sasl.username``/``sasl.password``,
``ssl.ca.location``) and becomes ``sasl.jaas.config``/a PEM truststore for Java. Three
clients read it: the Spark connector (Java kafka-clients, via ``kafka.``-prefixed options),
the appliance's kafka-python admin and metrics clients, and the load generator's
librdkafka clients. Keeping the translation here, in a leaf module, means they can never
disagree about what the operator asked for.

The password is held in a ``Secret`` whose ``repr``/``str`` hide it, so a settings object
that reaches a log or an error message shows ``'***'``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# librdkafka-only spellings: translated for Java, never passed to it as unknown configs.
RDKAFKA_ONLY = ("sasl.username", "sasl.password", "ssl.ca.location")


class SecuritySettingsError(ValueError):
    """The settings contradict each other; the message names the property (no values)."""


class Secret:
    """A string that does not print itself."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'***'"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def _jaas_value(jaas: str, field: str) -> str | None:
    match = re.search(rf'\b{field}\s*=\s*"((?:[^"\\]|\\.)*)"', jaas)
    return re.sub(r"\\(.)", r"\1", match.group(1)) if match else None


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Login(NamedTuple):
    """PLAIN/SCRAM credentials, complete: what every client dialect is given."""

    mechanism: str
    username: str
    password: Secret


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: Secret | None = None
    ca_file: str | None = None  # PEM; None: the system's trusted CAs
    check_hostname: bool = True

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def credentials(self) -> Login | None:
        """A PLAIN/SCRAM username and password this module can hand to every client."""
        if (self.sasl and self.mechanism in MECHANISMS and self.username is not None
                and self.password is not None):
            return Login(self.mechanism, self.username, self.password)
        return None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        protocol = str(props.get("security.protocol", "PLAINTEXT")).upper()
        if protocol not in PROTOCOLS:
            raise SecuritySettingsError(f"security.protocol: must be one of "
                                        f"{', '.join(PROTOCOLS)}")
        mechanism = None
        username = password = None
        if protocol.startswith("SASL_"):
            # Other mechanisms (GSSAPI, OAUTHBEARER) and JAAS from a system-wide file are
            # left to the clients' own pass-through settings; only PLAIN and SCRAM
            # credentials are translated here.
            mechanism = str(props.get("sasl.mechanism", "GSSAPI")).upper()
            jaas = str(props.get("sasl.jaas.config", ""))
            username = props.get("sasl.username") or _jaas_value(jaas, "username")
            secret = props.get("sasl.password") or _jaas_value(jaas, "password")
            if mechanism in MECHANISMS and bool(username) != bool(secret):
                raise SecuritySettingsError(
                    "sasl.jaas.config: needs both username=\"...\" and password=\"...\" "
                    "(or set both sasl.username and sasl.password)")
            password = Secret(str(secret)) if secret else None
        ca_file = props.get("ssl.ca.location")
        if ca_file is None and str(props.get("ssl.truststore.type", "")).upper() == "PEM":
            ca_file = props.get("ssl.truststore.location")
        algorithm = str(props.get("ssl.endpoint.identification.algorithm", "https")).lower()
        return cls(protocol=protocol, mechanism=mechanism, username=username,
                   password=password, ca_file=ca_file,
                   check_hostname=algorithm not in ("", "none"))

    # -- dialects ------------------------------------------------------------------------

    def java(self, props: Mapping[str, str]) -> dict[str, str]:
        """Java kafka-clients properties: ``props`` with librdkafka spellings translated."""
        out = {k: str(v) for k, v in props.items() if k not in RDKAFKA_ONLY}
        login = self.credentials
        if login is not None and "sasl.jaas.config" not in out:
            out["sasl.jaas.config"] = (
                f"{_LOGIN_MODULES[login.mechanism]} required "
                f"username={_jaas_quote(login.username)} "
                f"password={_jaas_quote(login.password.reveal())};")
        if self.tls and self.ca_file and "ssl.truststore.location" not in out:
            out["ssl.truststore.type"] = "PEM"
            out["ssl.truststore.location"] = self.ca_file
        return out

    def kafka_python(self) -> dict:
        """kafka-python keyword arguments."""
        out: dict = {}
        if self.protocol != "PLAINTEXT":
            out["security_protocol"] = self.protocol
        if self.sasl:
            out["sasl_mechanism"] = self.mechanism
        login = self.credentials
        if login is not None:
            out.update(sasl_plain_username=login.username,
                       sasl_plain_password=login.password.reveal())
        if self.tls:
            if self.ca_file:
                out["ssl_cafile"] = self.ca_file
            if not self.check_hostname:
                out["ssl_check_hostname"] = False
        return out

    def librdkafka(self) -> dict:
        """confluent-kafka (librdkafka) configuration."""
        out: dict = {}
        if self.protocol != "PLAINTEXT":
            out["security.protocol"] = self.protocol.lower()
        if self.sasl:
            out["sasl.mechanism"] = self.mechanism
        login = self.credentials
        if login is not None:
            out.update({"sasl.username": login.username,
                        "sasl.password": login.password.reveal()})
        if self.tls:
            if self.ca_file:
                out["ssl.ca.location"] = self.ca_file
            out["ssl.endpoint.identification.algorithm"] = (
                "https" if self.check_hostname else "none")
        return out
