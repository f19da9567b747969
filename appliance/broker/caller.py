"""Who sent a request, as every handler and the authorizer see it.

At the broker's bottom because the server fills it in per connection (peer host, then the
principal once SASL succeeds) and the wire handlers of every room (log, groups, configs,
ACLs) pass it on to the authorizer: one type, below all of them.
"""

from __future__ import annotations

from typing import NamedTuple


class Caller(NamedTuple):
    """Who sent a request: the header's client id, the connection's peer host, and the
    principal it authenticated as (``User:NAME``; ``User:ANONYMOUS`` without SASL)."""

    client_id: str
    host: str
    principal: str = "User:ANONYMOUS"
