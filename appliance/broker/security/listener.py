"""What a listener demands of a connection: TLS, SASL, both or neither (Kafka's four
security protocols), built once from the broker's config and checked before it listens.

| protocol         | TLS | SASL | mechanisms offered by default                     |
|------------------|-----|------|---------------------------------------------------|
| PLAINTEXT        | no  | no   | -                                                 |
| SSL              | yes | no   | -                                                 |
| SASL_PLAINTEXT   | no  | yes  | SCRAM-SHA-256, SCRAM-SHA-512 (PLAIN only if asked: |
|                  |     |      | it would send the password in the clear)          |
| SASL_SSL         | yes | yes  | PLAIN, SCRAM-SHA-256, SCRAM-SHA-512               |
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from appliance.broker.security.credentials import (
    CredentialsError,
    Users,
    load_if_present,
    load_users,
)
from appliance.broker.security.sasl import ALL_MECHANISMS, PLAIN, SaslSession, SaslSettings
from appliance.broker.security.tls import TlsError, server_context

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class ListenerError(Exception):
    """The listener's security settings are unusable (one line naming flag or file)."""


@dataclass(frozen=True)
class ListenerSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslSettings | None = None

    def new_session(self) -> SaslSession | None:
        return SaslSession(self.sasl) if self.sasl is not None else None


def default_mechanisms(protocol: str) -> tuple[str, ...]:
    if protocol == "SASL_SSL":
        return ALL_MECHANISMS
    if protocol == "SASL_PLAINTEXT":
        return tuple(m for m in ALL_MECHANISMS if m != PLAIN)
    return ()


def build(protocol: str, certfile: str | None = None, keyfile: str | None = None,
          client_ca: str | None = None, users_file: str | None = None,
          mechanisms: tuple[str, ...] | None = None) -> ListenerSecurity:
    if protocol not in PROTOCOLS:
        raise ListenerError(f"--security-protocol: must be one of {', '.join(PROTOCOLS)} "
                            f"(got {protocol!r})")
    tls = protocol in ("SSL", "SASL_SSL")
    with_sasl = protocol.startswith("SASL_")
    if tls and not certfile:
        raise ListenerError(f"--ssl-certfile: required for {protocol}")
    if not tls and (certfile or keyfile or client_ca):
        raise ListenerError(f"--ssl-certfile/--ssl-keyfile/--ssl-client-ca: only for SSL "
                            f"and SASL_SSL (security protocol is {protocol})")
    if with_sasl and not users_file:
        raise ListenerError(f"--sasl-users: required for {protocol} (or --data-dir, whose "
                            f"users.toml the admin API and `appliance broker-user` write)")
    if not with_sasl and (users_file or mechanisms):
        raise ListenerError(f"--sasl-users/--sasl-mechanisms: only for SASL_PLAINTEXT and "
                            f"SASL_SSL (security protocol is {protocol})")
    context = None
    if tls:
        assert certfile is not None  # required for TLS, checked above
        try:
            context = server_context(certfile, keyfile, client_ca)
        except TlsError as exc:
            raise ListenerError(f"--ssl-certfile/--ssl-keyfile: {exc}") from None
    sasl = None
    if with_sasl:
        offered = tuple(mechanisms) if mechanisms else default_mechanisms(protocol)
        for m in offered:
            if m not in ALL_MECHANISMS:
                raise ListenerError(f"--sasl-mechanisms: unknown mechanism {m!r} (want "
                                    f"{', '.join(ALL_MECHANISMS)})")
        assert users_file is not None  # required with SASL, checked above
        try:
            users = load_users(users_file)
        except CredentialsError as exc:
            raise ListenerError(f"--sasl-users: {exc}") from None
        sasl = SaslSettings(mechanisms=offered, users=users)
    return ListenerSecurity(protocol=protocol, ssl_context=context, sasl=sasl)


def from_config(config) -> ListenerSecurity:
    """The listener of a ``BrokerConfig``: a SASL listener's users come from
    ``--sasl-users``, else from the data directory's users file."""
    users_file = config.sasl_users_file
    if users_file is None and config.security_protocol.startswith("SASL_"):
        users_file = config.users_path
    return build(config.security_protocol, config.ssl_certfile, config.ssl_keyfile,
                 config.ssl_client_ca, users_file, config.sasl_mechanisms)


def managed_users(config, security: ListenerSecurity) -> Users | None:
    """The users the admin API manages (Describe/AlterUserScramCredentials): the SASL
    listener's own (a change is in force for its next login), else the data directory's
    users file, kept for when the broker listens with SASL; None: no file to keep them."""
    if security.sasl is not None:
        return security.sasl.users
    path = config.users_path
    if path is None:
        return None
    try:
        return load_if_present(path)
    except CredentialsError as exc:
        raise ListenerError(f"--data-dir: {exc}") from None
