"""The composition root: the only place that knows which concrete adapters exist."""

from __future__ import annotations

from collections.abc import Callable

from governor.adapters.providers.fake import FakeProvider
from governor.db import schema
from governor.db.engine import build_engine, session_factory, unit_of_work
from governor.domain.ports import Clock, PodController, SystemClock
from governor.services import tokens
from governor.services.context import GovernorConfig, ServiceContext
from governor.services.health import TickLog
from governor.settings import Settings

ProviderFactory = Callable[[Settings, Clock], PodController]

PROVIDERS: dict[str, ProviderFactory] = {
    "fake": lambda s, clock: FakeProvider(
        clock,
        hourly_rate_usd=s.fake_hourly_rate_usd,
        stop_latency_s=s.fake_stop_latency_s,
        stop_failures=s.fake_stop_failures,
        state_file=s.fake_state_file,
    ),
}


class DatabaseBehind(RuntimeError):
    """The database schema is older than this governor; `governor migrate` brings it up."""


def build_context(settings: Settings, clock: Clock | None = None) -> ServiceContext:
    clock = clock or SystemClock()
    engine = build_engine(settings.database_url)
    return ServiceContext(
        engine=engine,
        sessions=session_factory(engine),
        clock=clock,
        providers={name: make(settings, clock) for name, make in PROVIDERS.items()},
        config=GovernorConfig(
            enforce_interval_s=settings.enforce_interval_s,
            finished_linger_s=settings.finished_linger_s,
        ),
        ticks=TickLog(interval_s=settings.enforce_interval_s, enabled=settings.scheduler_enabled),
    )


def prepare_database(settings: Settings) -> None:
    """Bring an embedded SQLite database to head; refuse a server database that is behind."""
    engine = build_engine(settings.database_url)
    try:
        status = schema.schema_status(engine)
    finally:
        engine.dispose()
    if status.at_head:
        return
    if settings.embedded:
        schema.upgrade(settings.database_url)
        return
    raise DatabaseBehind(
        f"the database is at revision {status.current or '(empty)'} but this governor needs "
        f"{status.head}: run 'governor migrate' first"
    )


def bootstrap_operator(ctx: ServiceContext, settings: Settings) -> str | None:
    """Register the configured operator token, or generate one on first start (returned once)."""
    configured = settings.operator_token.get_secret_value() if settings.operator_token else None
    with unit_of_work(ctx.sessions) as session:
        return tokens.bootstrap_operator(session, configured, ctx.clock.now())
