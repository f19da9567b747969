"""The TLS side of an SSL or SASL_SSL listener: one server ``SSLContext`` from PEM files.

TLS 1.2 at least (what Java kafka-clients 3.9, librdkafka and kafka-python all speak), the
Python defaults' cipher choice, and optionally client certificates checked against a CA
(Kafka's ``ssl.client.auth=required``). The key file is a secret: like the users file it
must not be readable by group or others.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from appliance.broker.security.credentials import CredentialsError, check_mode


class TlsError(Exception):
    """Certificate or key unusable; the message names the file (never key material)."""


def server_context(certfile: str, keyfile: str | None = None,
                   client_ca: str | None = None) -> ssl.SSLContext:
    """``certfile``: the broker's certificate chain (PEM), ``keyfile`` its private key
    (PEM, unencrypted; default: inside ``certfile``); ``client_ca``: require client
    certificates signed by this CA."""
    key_path = Path(keyfile or certfile)
    try:
        check_mode(key_path)
    except CredentialsError as exc:
        raise TlsError(str(exc)) from None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(certfile, str(key_path))
    except FileNotFoundError as exc:
        raise TlsError(f"{exc.filename}: file not found") from None
    except (ssl.SSLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc.__class__.__name__
        raise TlsError(f"{certfile} / {key_path}: not a usable PEM certificate and key "
                       f"({reason})") from None
    if client_ca:
        try:
            ctx.load_verify_locations(cafile=client_ca)
        except (ssl.SSLError, OSError) as exc:
            raise TlsError(f"{client_ca}: not a usable PEM CA file ({exc.__class__.__name__})"
                           ) from None
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx
