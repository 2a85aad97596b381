"""Who is calling, from a bearer token: remembered, or looked up under its source's limits.

The API's every route and the dashboard's sign-in ask here. A token the cache remembers is
answered at once, with no thread hop and no limit consulted: that is every heartbeat but a
job's first. Any other token is looked up in a worker thread, off the event loop, under the
limits of the address it came from (`AuthLimits`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from functools import partial
from typing import Protocol, TypeVar

from sqlalchemy.orm import Session, sessionmaker

from governor.domain.errors import Unauthenticated
from governor.services.security.auth_limits import AuthLimits
from governor.services.security.tokens import Principal, TokenCache

T = TypeVar("T")


class InThread(Protocol):
    """Runs a blocking call in a worker thread and awaits it (the server's thread pool)."""

    def __call__(self, func: Callable[[], T], /) -> Awaitable[T]: ...


async def identify(
    token: str | None,
    now: datetime,
    *,
    cache: TokenCache,
    limits: AuthLimits,
    sessions: sessionmaker[Session],
    address: Callable[[], str],
    in_thread: InThread,
) -> Principal:
    """The caller whose token this is. Unauthenticated (401) if the token is missing or not
    valid; TooManyAttempts (429) instead once its source (`address`, asked only for a lookup
    or a failure) is past its failure rate, or when its turn to be looked up is too far off;
    Unavailable (503) when no lookup is free in time.

    When the cache is due to hear of revocations it asks first, for all the tokens it
    remembers at once (at most once each check), so a remembered token never waits on the
    limits."""
    try:
        caller = cache.remembered(token, now)
        if caller is None and cache.stale():
            await in_thread(partial(cache.refresh, sessions, now))
            caller = cache.remembered(token, now)
        if caller is not None:
            return caller
        async with limits.lookup(address()):
            return await in_thread(partial(cache.authenticate, sessions, token, now))
    except Unauthenticated:
        limits.failed(address())
        raise
