"""Failed authentications are limited: per client address, and per token prefix (its role's).

Past `per_address` failures from one address, or `per_prefix` failures with one prefix, in a
window of `window_s` seconds, further attempts from there are refused until the window ends
(429 with Retry-After) without being looked up. A valid token is never counted. The client
address is the connection's peer, or, when the peer is a trusted proxy, the last address in
X-Forwarded-For that is not one of the trusted proxies.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Callable, Sequence

from governor.services.security.windows import FixedWindows, Throttled

PER_ADDRESS = 30
PER_PREFIX = 300
WINDOW_S = 60.0

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TooManyAttempts(Throttled):
    """Too many failed authentications from here (429)."""

    code = "too_many_attempts"


def prefix_of(token: str | None) -> str:
    """The role prefix a token claims (`gov_op`, `gov_job`, ...), or `other`."""
    parts = (token or "").split("_", 2)
    return "_".join(parts[:2]) if len(parts) == 3 and parts[0] == "gov" else "other"


def trusted_networks(proxies: Sequence[str]) -> tuple[Network, ...]:
    """The proxies' addresses or networks (`10.0.0.0/8`, `127.0.0.1`); ValueError if one is
    not an address."""
    return tuple(ipaddress.ip_network(p.strip(), strict=False) for p in proxies if p.strip())


def client_address(peer: str | None, forwarded_for: str | None, trusted: Sequence[Network]) -> str:
    """Who is asking: the peer, unless it is a trusted proxy that says whom it forwards."""
    address = peer or "unknown"
    if not forwarded_for or not _within(address, trusted):
        return address
    for hop in reversed([h.strip() for h in forwarded_for.split(",") if h.strip()]):
        if not _within(hop, trusted):
            return hop
    return address


def _within(address: str, trusted: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in trusted)


class FailureLimiter:
    """Counts failed authentications per key in fixed windows; thread-safe, in memory (each
    replica counts its own)."""

    def __init__(
        self,
        *,
        per_address: int = PER_ADDRESS,
        per_prefix: int = PER_PREFIX,
        window_s: float = WINDOW_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limits = {"address": per_address, "prefix": per_prefix}
        self._counts = FixedWindows(window_s, monotonic=monotonic)

    def check(self, address: str, token: str | None) -> None:
        """TooManyAttempts when this address, or this token's prefix, is over its limit."""
        for kind, key in self._keys(address, token):
            if self._counts.count((kind, key)) >= self._limits[kind]:
                left = self._counts.left_s()
                raise TooManyAttempts(
                    f"too many failed authentications from this {kind}; try again in "
                    f"{math.ceil(left)} s",
                    left,
                )

    def failed(self, address: str, token: str | None) -> None:
        for key in self._keys(address, token):
            self._counts.add(key)

    @staticmethod
    def _keys(address: str, token: str | None) -> tuple[tuple[str, str], ...]:
        return (("address", address), ("prefix", prefix_of(token)))
