"""Filters for the deploy's web authentication: the Spark UIs' bearer token (Spark's own
JWSFilter) and the bcrypt hashes of the Prometheus and Alertmanager web config.

Both are derived on the controller from secrets in the vault, so a host never holds more
than it needs: the Spark hosts the key, the monitoring host the token, Prometheus and
Alertmanager only a hash. Unit tested in tests/deploy/test_site_filters.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import bcrypt

#: bcrypt's cost for the web passwords: ~50 ms a check (the servers cache good ones).
BCRYPT_ROUNDS = 10


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def spark_ui_key(secret: str) -> str:
    """The key of Spark's JWSFilter (``spark.org.apache.spark.ui.JWSFilter.param.secretKey``,
    base64url): 256 bits derived from the site's Spark secret, so the vault holds one."""
    return _b64url(hashlib.sha256(f"spark-ui:{secret}".encode()).digest())


def spark_ui_token(secret: str) -> str:
    """The bearer token the Spark UIs' JWSFilter accepts: a JWS (HS256) over an empty
    payload, signed with ``spark_ui_key(secret)``. What Prometheus and the play send."""
    key = base64.urlsafe_b64decode(spark_ui_key(secret) + "=")
    signing_input = (_b64url(json.dumps({"alg": "HS256", "typ": "JWT"},
                                        separators=(",", ":")).encode())
                     + "." + _b64url(b"{}"))
    signature = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64url(signature)}"


def web_password_hash(password: str, current: str | None = None) -> str:
    """A bcrypt hash of ``password`` for a web config's basic_auth_users: ``current`` (the
    hash the host has) when it still matches, so an unchanged password changes no file;
    otherwise a new one, with a fresh salt."""
    secret = str(password).encode()
    if current:
        try:
            if bcrypt.checkpw(secret, str(current).encode()):
                return str(current)
        except ValueError:
            pass  # not a bcrypt hash: replace it
    return bcrypt.hashpw(secret, bcrypt.gensalt(rounds=BCRYPT_ROUNDS)).decode()


class FilterModule:
    """Ansible's entry point for the filters above."""

    def filters(self):
        return {"spark_ui_key": spark_ui_key, "spark_ui_token": spark_ui_token,
                "web_password_hash": web_password_hash}
