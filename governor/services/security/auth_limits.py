"""Token lookups are limited per source, so that no one's failures can lock anyone else out.

A token the cache remembers meets none of these limits (`callers.identify`); a token that
must be looked up in the database is looked up under them:

- A request's source is its client address (the connection's peer or, when the peer is a
  trusted proxy, the last address in X-Forwarded-For that is not one of the trusted proxies);
  IPv6 addresses count by their /64 network (what one host is given), an IPv4-mapped IPv6
  address as its IPv4 address.
- Failures are counted per source in fixed windows of `window_s` seconds. A token that fails
  is answered 401, or 429 (with Retry-After) once its source has failed `per_source` times in
  the window. A valid token is never counted, and never refused for anyone's failures.
- While a source is within its failure rate its lookups are not paced. Once past it, its
  lookups take turns, one every `pace_s` seconds: a flood from there costs the database one
  lookup a second. A request waits for its turn without holding up any other; one whose turn
  is more than `max_wait_s` away is answered 429 without being looked up.
- At most `max_lookups` lookups are under way at once, all sources together. A request waits
  for one of them, within the same `max_wait_s` all told; past that it is answered 503.

Sign-in through the identity provider takes no token, and each start (a device sign-in, a
browser's trip to the provider) asks the provider for something: starts are counted per
source in the same windows, and past `starts_per_source` in one a start is answered 429 (with
Retry-After) without asking the provider. A sign-in the provider refuses (a device code it
does not know, or no longer; a browser's code it will not exchange) is a failed
authentication, counted as a token's is.

So a valid token is answered whatever other sources send; sent from a source that is past
its own failure rate, it waits at most `max_wait_s` for its turn, and is refused only when
that source sends lookups faster than its pace. Each replica counts its own, in memory.
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from weakref import WeakKeyDictionary

from governor.domain.errors import Unavailable
from governor.services.security.windows import MAX_KEYS, FixedWindows, Throttled, keep_newest

PER_SOURCE = 30  # failures in a window, before 429
WINDOW_S = 60.0
PACE_S = 1.0  # between two lookups of a source past its failure rate
MAX_WAIT_S = 10.0  # the longest a request waits for its turn and a lookup, all told
MAX_LOOKUPS = 8  # under way at once, all sources together
STARTS_PER_SOURCE = 10  # sign-ins started in a window, before 429

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TooManyAttempts(Throttled):
    """Too many failed authentications from here (429)."""

    code = "too_many_attempts"


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


def source_of(address: str) -> str:
    """What an address is counted as: an IPv4 address itself, an IPv6 address its /64
    network (an IPv4-mapped one its IPv4 address), anything else as it is written."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv4Address):
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))


class AuthLimits:
    """The limits of token lookups, per source (see the module). Thread-safe; the waits are
    asynchronous: a waiting request holds up no other."""

    def __init__(
        self,
        *,
        per_source: int = PER_SOURCE,
        window_s: float = WINDOW_S,
        pace_s: float = PACE_S,
        max_wait_s: float = MAX_WAIT_S,
        max_lookups: int = MAX_LOOKUPS,
        starts_per_source: int = STARTS_PER_SOURCE,
        max_keys: int = MAX_KEYS,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.per_source, self.pace_s, self.max_wait_s = per_source, pace_s, max_wait_s
        self._max_lookups, self._max_keys = max_lookups, max_keys
        self._monotonic, self._sleep = monotonic, sleep
        self.starts_per_source = starts_per_source
        self._failures = FixedWindows(window_s, max_keys=max_keys, monotonic=monotonic)
        self._starts = FixedWindows(window_s, max_keys=max_keys, monotonic=monotonic)
        self._turns: OrderedDict[str, float] = OrderedDict()  # a paced source's next turn
        self._lock = threading.Lock()
        self._slots: WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            WeakKeyDictionary()
        )

    @asynccontextmanager
    async def lookup(self, address: str) -> AsyncIterator[None]:
        """Around one lookup of a token sent from `address`: waits for the source's turn (none
        while it is within its failure rate) and for one of the lookups under way at once.
        TooManyAttempts when the turn is more than `max_wait_s` away; Unavailable when no
        lookup is free within what is left of `max_wait_s`."""
        waited = self._turn(source_of(address))
        if waited > 0:
            await self._sleep(waited)
        slots = self._slots_here()
        if slots.locked():
            try:
                await asyncio.wait_for(slots.acquire(), max(0.0, self.max_wait_s - waited))
            except TimeoutError:
                raise Unavailable(
                    "too many tokens are being looked up at once; try again shortly"
                ) from None
        else:
            await slots.acquire()  # free: taken at once
        try:
            yield
        finally:
            slots.release()

    def failed(self, address: str) -> None:
        """Count a failed authentication from `address`: TooManyAttempts (to be answered
        instead of 401) when its source is past its failure rate."""
        if self._failures.add(source_of(address)) > self.per_source:
            raise self._too_many(self._failures.left_s())

    def started(self, address: str) -> None:
        """Count a sign-in started from `address` (one that asks the identity provider):
        TooManyAttempts past `starts_per_source` in this window, the provider not asked."""
        if not self._starts.take(source_of(address), self.starts_per_source):
            left = self._starts.left_s()
            raise TooManyAttempts(
                f"too many sign-ins started from this address; try again in {math.ceil(left)} s",
                left,
            )

    def _turn(self, source: str) -> float:
        """Seconds this source's lookup waits for its turn: none while the source is within
        its failure rate, else its turn in line, one every `pace_s`."""
        with self._lock:
            if self._failures.count(source) < self.per_source:
                return 0.0
            now = self._monotonic()
            turn = max(now, self._turns.get(source, now))
            if turn - now > self.max_wait_s:
                raise self._too_many(max(1.0, turn - now - self.max_wait_s))
            keep_newest(self._turns, source, turn + self.pace_s, self._max_keys)
            return turn - now

    def _slots_here(self) -> asyncio.Semaphore:
        """The lookups under way at once, on this event loop (the server runs one)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            slots = self._slots.get(loop)
            if slots is None:
                slots = self._slots[loop] = asyncio.Semaphore(self._max_lookups)
            return slots

    @staticmethod
    def _too_many(retry_after_s: float) -> TooManyAttempts:
        return TooManyAttempts(
            f"too many failed authentications from this address; try again in "
            f"{math.ceil(retry_after_s)} s",
            retry_after_s,
        )
