"""The composition root: the only place that knows which concrete adapters exist."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from governor.adapters.notify.webhook import WebhookSink
from governor.adapters.providers._http import provider_client
from governor.adapters.providers.fake import FakeProvider
from governor.adapters.providers.runpod import RunPodProvider
from governor.adapters.telemetry.fake import FakeNvml
from governor.adapters.telemetry.nvml import NvmlSource
from governor.db import schema
from governor.db.engine import build_engine, session_factory, unit_of_work
from governor.domain.model import Severity
from governor.domain.policy import Watch
from governor.domain.ports import AnyProvider, Clock, SystemClock
from governor.domain.telemetry import TelemetrySource
from governor.services import tokens
from governor.services.context import GovernorConfig, ServiceContext
from governor.services.health import TickLog
from governor.services.notifications import Notifier, Retry, Subscription, route_events
from governor.settings import Settings

ProviderFactory = Callable[[Settings, Clock], AnyProvider | None]  # None: not configured


def _runpod(settings: Settings, _clock: Clock) -> RunPodProvider | None:
    if settings.runpod_api_key is None:
        return None
    key = settings.runpod_api_key.get_secret_value()
    return RunPodProvider(
        provider_client(), key, settings.runpod_url, stop_latency_s=settings.runpod_stop_latency_s
    )


PROVIDERS: dict[str, ProviderFactory] = {
    "fake": lambda s, clock: FakeProvider(
        clock,
        hourly_rate_usd=s.fake_hourly_rate_usd,
        stop_latency_s=s.fake_stop_latency_s,
        stop_failures=s.fake_stop_failures,
        state_file=s.fake_state_file,
    ),
    "runpod": _runpod,
}
HOW_TO_CONFIGURE = {
    "runpod": "set GOVERNOR_RUNPOD_API_KEY (or GOVERNOR_RUNPOD_API_KEY_FILE) and restart",
}


def build_providers(settings: Settings, clock: Clock) -> dict[str, AnyProvider]:
    """Every provider whose credentials are configured ("fake" always is)."""
    built = {name: make(settings, clock) for name, make in PROVIDERS.items()}
    return {name: provider for name, provider in built.items() if provider is not None}


class DatabaseBehind(RuntimeError):
    """The database schema is older than this governor; `governor migrate` brings it up."""


def telemetry_source(fake_nvml: str | None, clock: Clock) -> TelemetrySource:
    """This machine's GPUs through NVML; with `fake_nvml`, a scripted fake driver under it.

    The fake is installed for the life of the process (it replaces the driver, not NVML's
    Python bindings, so everything above it runs as it would on a GPU machine).
    """
    if fake_nvml:
        FakeNvml(fake_nvml).install()
    return NvmlSource(clock)


def build_notifier(settings: Settings) -> Notifier | None:
    """The configured webhooks behind one notifier (none configured: no notifier at all)."""
    if not settings.webhooks:
        return None
    subscriptions = [
        Subscription(
            WebhookSink(hook.url, hook.kind, httpx.Client(timeout=settings.webhook_timeout_s)),
            Severity(hook.min_severity),
        )
        for hook in settings.webhooks
    ]
    return Notifier(
        subscriptions,
        retry=Retry(
            max_attempts=settings.webhook_max_attempts, backoff_s=settings.webhook_backoff_s
        ),
        dedupe_window_s=settings.webhook_dedupe_window_s,
    )


def build_context(settings: Settings, clock: Clock | None = None) -> ServiceContext:
    clock = clock or SystemClock()
    engine = build_engine(settings.database_url)
    sessions = session_factory(engine)
    notifier = build_notifier(settings)
    providers = build_providers(settings, clock)
    if notifier is not None:
        route_events(sessions, notifier)
    return ServiceContext(
        engine=engine,
        sessions=sessions,
        clock=clock,
        providers=providers,
        unconfigured={n: how for n, how in HOW_TO_CONFIGURE.items() if n not in providers},
        config=GovernorConfig(
            enforce_interval_s=settings.enforce_interval_s,
            finished_linger_s=settings.finished_linger_s,
            watch=Watch(
                idle_util_pct=settings.idle_util_pct,
                idle_window_s=settings.idle_window_s,
                stall_window_s=settings.stall_window_s,
                compile_allowance_s=settings.compile_allowance_s,
                headroom_pct=settings.headroom_pct,
            ),
            telemetry_interval_s=settings.telemetry_interval_s,
            billing_interval_s=settings.billing_interval_s,
            telemetry_raw_keep_s=settings.telemetry_raw_keep_s,
            telemetry_minute_keep_s=settings.telemetry_minute_keep_s,
            metrics_require_token=settings.metrics_require_token,
        ),
        ticks=TickLog(interval_s=settings.enforce_interval_s, enabled=settings.scheduler_enabled),
        telemetry=telemetry_source(settings.fake_nvml, clock),
        notifier=notifier,
    )


def close_context(ctx: ServiceContext) -> None:
    if ctx.telemetry is not None:
        ctx.telemetry.close()
    if ctx.notifier is not None:
        ctx.notifier.close()
    ctx.engine.dispose()


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
