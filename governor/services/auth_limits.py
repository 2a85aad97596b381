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
import threading
import time
from collections.abc import Callable, Sequence

from governor.domain.errors import GovernorError

PER_ADDRESS = 30
PER_PREFIX = 300
WINDOW_S = 60.0
MAX_KEYS = 100_000  # an attacker with many addresses cannot grow this without bound

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TooManyAttempts(GovernorError):
    """Too many failed authentications from here (429)."""

    code = "too_many_attempts"

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


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
        self._window_s, self._monotonic = window_s, monotonic
        self._window = -1
        self._counts: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def check(self, address: str, token: str | None) -> None:
        """TooManyAttempts when this address, or this token's prefix, is over its limit."""
        with self._lock:
            self._roll()
            for kind, key in self._keys(address, token):
                if self._counts.get((kind, key), 0) >= self._limits[kind]:
                    raise TooManyAttempts(
                        f"too many failed authentications from this {kind}; try again in "
                        f"{math.ceil(self._left_s())} s",
                        self._left_s(),
                    )

    def failed(self, address: str, token: str | None) -> None:
        with self._lock:
            self._roll()
            if len(self._counts) >= MAX_KEYS:
                self._counts.clear()
            for kind, key in self._keys(address, token):
                self._counts[(kind, key)] = self._counts.get((kind, key), 0) + 1

    @staticmethod
    def _keys(address: str, token: str | None) -> tuple[tuple[str, str], ...]:
        return (("address", address), ("prefix", prefix_of(token)))

    def _roll(self) -> None:
        window = int(self._monotonic() // self._window_s)
        if window != self._window:
            self._window, self._counts = window, {}

    def _left_s(self) -> float:
        return max(1.0, (self._window + 1) * self._window_s - self._monotonic())
