"""What the fleet benchmarks share: a governor built in-process, a scratch database, output.

A benchmark builds its governor the way the tests do: a freshly migrated database (a SQLite
file in a temporary folder, or a uniquely named PostgreSQL database created through an admin
connection and dropped afterwards, even on failure), a clock that moves only when told to,
fake providers, and the service functions to set up budgets, pods and runs. Results go to
stdout as one JSON object per line; progress goes to stderr.

Not a benchmark itself: imported by bench/enforce_scale.py and bench/overshoot.py.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from server_process import DEFAULT_ADMIN_URL, database
from sqlalchemy import func, select

from governor.db import schema
from governor.db.engine import build_engine, session_factory, unit_of_work
from governor.db.tables import LedgerEntryRow
from governor.domain.ports import AnyProvider, SystemClock
from governor.services.context import GovernorConfig, ServiceContext
from governor.services.jobs import checkins
from governor.services.replica.health import TickLog
from governor.services.replica.leadership import Lease
from governor.settings import Settings

DATABASES = ("sqlite", "postgres")
START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class SimClock:
    """A clock that moves only when told to (the governor's Clock port)."""

    def __init__(self, start: datetime = START) -> None:
        self.current = start

    def now(self) -> datetime:
        return self.current

    def advance(self, seconds: float) -> datetime:
        self.current += timedelta(seconds=seconds)
        return self.current

    def move_to(self, elapsed_s: float, since: datetime = START) -> datetime:
        """Set the time to `elapsed_s` seconds after `since` (never backwards)."""
        self.current = max(self.current, since + timedelta(seconds=elapsed_s))
        return self.current

    def elapsed_s(self, since: datetime = START) -> float:
        return (self.current - since).total_seconds()


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def emit(record: Mapping[str, Any]) -> None:
    """One result, as one JSON line on stdout."""
    print(json.dumps(record), flush=True)


def exit_cleanly_on_sigterm() -> None:
    """A terminated benchmark unwinds like an interrupted one: its scratch database is dropped."""
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))


def quiet_event_log() -> None:
    """The governor logs every event it records; thousands of stops would flood stderr."""
    logging.getLogger("governor.events").setLevel(logging.CRITICAL + 1)


def database_kinds(choice: str) -> list[str]:
    """`sqlite`, `postgres` or `both`, as the list of databases to run against."""
    return list(DATABASES) if choice == "both" else [choice]


def sizes(spec: str) -> list[int]:
    """'100,1000' as [100, 1000]."""
    values = [int(part) for part in spec.split(",") if part.strip()]
    if not values or min(values) <= 0:
        raise ValueError(f"expected positive integers separated by commas, got {spec!r}")
    return values


@contextmanager
def scratch_database(kind: str, postgres_url: str = DEFAULT_ADMIN_URL) -> Iterator[str]:
    """The URL of an empty database migrated to head; it is removed afterwards."""
    if kind not in ("sqlite", "postgres"):
        raise ValueError(f"unknown database {kind!r}: sqlite or postgres")
    with (
        tempfile.TemporaryDirectory(prefix="gov_bench_") as folder,
        database(kind, postgres_url, Path(folder)) as url,
    ):
        schema.upgrade(url)
        yield url


def build_context(
    url: str,
    clock: SimClock,
    providers: Mapping[str, AnyProvider],
    config: GovernorConfig | None = None,
) -> ServiceContext:
    """A governor's services without HTTP or a scheduler, as the integration tests build one,
    on as many database connections as a server keeps by default."""
    config = config or GovernorConfig()
    defaults = Settings.model_fields
    engine = build_engine(
        url,
        pool_size=defaults["database_pool_size"].default,
        max_overflow=defaults["database_max_overflow"].default,
    )
    sessions = session_factory(engine)
    lease = Lease(sessions, SystemClock(), "bench", lease_s=86400.0)  # the only replica
    lease.probe({})
    return ServiceContext(
        engine=engine,
        sessions=sessions,
        clock=clock,
        providers=providers,
        config=config,
        ticks=TickLog(),
        lease=lease,
    )


def check_in(
    ctx: ServiceContext, run_id: str, beat: checkins.Heartbeat, now: datetime
) -> checkins.Directive:
    """A job's heartbeat through the service call the API's heartbeat route makes."""
    return checkins.check_in(ctx.sessions, ctx.config, run_id, beat, now)


def ledger_rows(ctx: ServiceContext) -> int:
    """How many ledger entries the database holds."""
    with unit_of_work(ctx.sessions) as session:
        return int(session.scalar(select(func.count()).select_from(LedgerEntryRow)) or 0)


class Stopwatch:
    """Seconds since it was made, for progress lines."""

    def __init__(self) -> None:
        self.started = time.perf_counter()

    def __str__(self) -> str:
        return f"{time.perf_counter() - self.started:.1f} s"
