"""The composition root: the only place that knows which concrete adapters exist."""

from __future__ import annotations

import logging
import os
import signal
import ssl
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr
from sqlalchemy.exc import IntegrityError

from governor.adapters.notify.webhook import WebhookSink
from governor.adapters.providers import kubernetes
from governor.adapters.providers._http import provider_client
from governor.adapters.providers.gcp import GcpProvider, StaticToken, TokenSource
from governor.adapters.providers.gcp_billing import BilledGcpProvider
from governor.adapters.providers.kubernetes import KubernetesProvider
from governor.adapters.providers.kueue import KueueProvider
from governor.adapters.providers.lambda_cloud import LambdaProvider
from governor.adapters.providers.local import LocalCommandProvider, LocalProvider
from governor.adapters.providers.runpod import RunPodProvider
from governor.adapters.providers.vast import VastProvider
from governor.adapters.telemetry.nvml import NvmlSource
from governor.db import schema
from governor.db.engine import build_engine, session_factory, unit_of_work
from governor.db.file_lock import sqlite_scheduler_lock
from governor.domain.health import HealthRule
from governor.domain.model import Severity
from governor.domain.policy import Watch
from governor.domain.ports import AnyProvider, Clock, IdentityProvider, ProviderError, SystemClock
from governor.domain.rate_card import RateCard
from governor.domain.sweep import SweepRule
from governor.domain.telemetry import TelemetrySource
from governor.fakes.cloud import BillingFakeProvider, FakeProvider
from governor.fakes.nvml import FakeNvml
from governor.services.context import GovernorConfig, ServiceContext
from governor.services.notifications import (
    GaveUp,
    Notifier,
    Retry,
    Subscription,
    route_events,
)
from governor.services.replica import undelivered
from governor.services.replica.health import TickLog
from governor.services.replica.leadership import Lease
from governor.services.replica.write_watch import WriteWatch
from governor.services.security import shared_secrets, tokens
from governor.services.security.auth_limits import AuthLimits, Network, trusted_networks
from governor.services.security.signins import SigninConfig
from governor.services.security.tokens import TokenCache
from governor.services.security.write_limits import WriteKind, WriteLimiter
from governor.settings import Settings, group_grant

ProviderFactory = Callable[[Settings, Clock], AnyProvider | None]  # None: not configured

log = logging.getLogger(__name__)


class ProviderSetupError(ValueError):
    """A provider is configured in a way that cannot work; the message says what to change."""


def _secret(value: SecretStr | None) -> str | None:
    return None if value is None else value.get_secret_value()


def _fake(s: Settings, clock: Clock) -> FakeProvider:
    options: dict[str, Any] = {
        "hourly_rate_usd": s.fake_hourly_rate_usd,
        "stop_latency_s": s.fake_stop_latency_s,
        "stop_failures": s.fake_stop_failures,
        "state_file": s.fake_state_file,
    }
    if s.fake_billing_factor is None:
        return FakeProvider(clock, **options)
    return BillingFakeProvider(
        clock,
        billing_factor=s.fake_billing_factor,
        billing_lag_s=s.fake_billing_lag_s,
        **options,
    )


def _runpod(s: Settings, _clock: Clock) -> RunPodProvider | None:
    key = _secret(s.runpod_api_key)
    if key is None:
        return None
    return RunPodProvider(
        provider_client(),
        key,
        s.runpod_url,
        stop_latency_s=s.runpod_stop_latency_s,
        volume_usd_per_gb_month=s.runpod_volume_usd_per_gb_month,
        stopped_volume_usd_per_gb_month=s.runpod_stopped_volume_usd_per_gb_month,
        high_performance_usd_per_gb_month=s.runpod_high_performance_volume_usd_per_gb_month,
    )


def _vast(s: Settings, _clock: Clock) -> VastProvider | None:
    key = _secret(s.vast_api_key)
    if key is None:
        return None
    return VastProvider(provider_client(), key, s.vast_url, stop_latency_s=s.vast_stop_latency_s)


def _lambda(s: Settings, _clock: Clock) -> LambdaProvider | None:
    key = _secret(s.lambda_api_key)
    if key is None:
        return None
    return LambdaProvider(
        provider_client(),
        key,
        s.lambda_url,
        stop_latency_s=s.lambda_stop_latency_s,
        filesystem_usd_per_gib_month=s.lambda_filesystem_usd_per_gb_month,
    )


def _gcp(s: Settings, _clock: Clock) -> GcpProvider | None:
    """A static token when one is set; otherwise Application Default Credentials through
    google-auth (an optional extra), refreshed as they expire."""
    if s.gcp_project is None:
        return None
    client = provider_client()
    token = _secret(s.gcp_access_token)
    source: TokenSource
    if token is not None:
        source = StaticToken(token)
    else:
        try:
            from governor.adapters.providers.gcp_auth import GoogleCredentials  # google-auth
        except ImportError:
            raise ProviderSetupError(
                "GOVERNOR_GCP_PROJECT is set but google-auth is not installed: "
                "pip install 'gpu-governor[gcp]'"
            ) from None
        try:
            source = GoogleCredentials.default(client)
        except ProviderError as exc:
            raise ProviderSetupError(
                f"{exc}; set GOOGLE_APPLICATION_CREDENTIALS (a key file or workload identity "
                "federation config), run `gcloud auth application-default login`, or set "
                "GOVERNOR_GCP_ACCESS_TOKEN"
            ) from None
    options: dict[str, Any] = {
        "rates": s.gcp_rates,
        "disk_rates": s.gcp_disk_rates,
        "stop_latency_s": s.gcp_stop_latency_s,
    }
    if s.gcp_billing_table is None:
        return GcpProvider(client, source, s.gcp_project, s.gcp_url, **options)
    try:
        return BilledGcpProvider(
            client,
            source,
            s.gcp_project,
            s.gcp_url,
            table=s.gcp_billing_table,
            bigquery_url=s.gcp_bigquery_url,
            **options,
        )
    except ValueError as exc:
        raise ProviderSetupError(f"GOVERNOR_GCP_BILLING_TABLE: {exc}") from None


def _aws(s: Settings, _clock: Clock) -> AnyProvider | None:
    if s.aws_region is None:
        return None
    try:
        from governor.adapters.providers.aws import Ec2Provider  # boto3: an optional extra
    except ImportError:
        raise ProviderSetupError(
            "GOVERNOR_AWS_REGION is set but boto3 is not installed: pip install 'gpu-governor[aws]'"
        ) from None
    options: dict[str, Any] = {
        "endpoint_url": s.aws_endpoint_url,
        "rates": s.aws_rates,
        "ebs_usd_per_gb_month": s.aws_ebs_usd_per_gb_month,
        "stop_latency_s": s.aws_stop_latency_s,
    }
    if not s.aws_billing:
        return Ec2Provider.connect(s.aws_region, **options)
    from governor.adapters.providers.aws_billing import BilledEc2Provider  # boto3 too

    return BilledEc2Provider.connect(
        s.aws_region,
        cost_explorer_url=s.aws_cost_explorer_url,
        min_interval_s=s.aws_billing_min_interval_s,
        settle_s=s.aws_billing_settle_s,
        **options,
    )


def _kubernetes(s: Settings, _clock: Clock) -> KubernetesProvider | None:
    """An explicit URL and token when set (a token file is read at every call: Kubernetes
    rotates service-account tokens); otherwise a kubeconfig (the setting, KUBECONFIG, then
    ~/.kube/config when present) or, inside a cluster, its service account, read by the
    official client's loader (an optional extra)."""
    token_file = s.kubernetes_token_file
    url, token, ca = s.kubernetes_url, _secret(s.kubernetes_token), s.kubernetes_ca_file
    if url is None and token is None and token_file is None:
        return _kubernetes_loaded(s)
    if url is None or (token is None and token_file is None):
        raise ProviderSetupError(
            "Kubernetes needs both GOVERNOR_KUBERNETES_URL and GOVERNOR_KUBERNETES_TOKEN "
            "(or GOVERNOR_KUBERNETES_TOKEN_FILE)"
        )
    verify = ssl.create_default_context(cafile=str(ca)) if ca is not None else True
    client = httpx.Client(timeout=httpx.Timeout(10.0, connect=5.0), verify=verify)
    if token is not None:
        credentials = kubernetes.BearerToken(client, token, url, "GOVERNOR_KUBERNETES_TOKEN")
    else:
        assert token_file is not None  # checked just above
        read = partial(_read_token, token_file)
        credentials = kubernetes.BearerToken(client, read, url, f"the token file {token_file}")
    return KubernetesProvider(credentials, stop_latency_s=s.kubernetes_stop_latency_s)


def _read_token(path: Path) -> str:
    return path.read_text().strip()


def _kubernetes_loaded(s: Settings) -> KubernetesProvider | None:
    """Credentials the official loader finds. Only the explicit settings stop the start when
    they cannot be used; a kubeconfig or service account merely found on this machine leaves
    Kubernetes unconfigured, with a warning, so a laptop's kubeconfig never blocks a start."""
    explicit = s.kubernetes_kubeconfig is not None or s.kubernetes_context is not None
    kubeconfig = s.kubernetes_kubeconfig or os.environ.get("KUBECONFIG") or None
    if kubeconfig is None and (Path.home() / ".kube" / "config").exists():
        kubeconfig = Path.home() / ".kube" / "config"
    if kubeconfig is None and s.kubernetes_context is not None:
        raise ProviderSetupError(
            "GOVERNOR_KUBERNETES_CONTEXT is set but no kubeconfig was found: set "
            "GOVERNOR_KUBERNETES_KUBECONFIG"
        )
    if kubeconfig is None and not Path(kubernetes.TOKEN_FILE).exists():
        return None
    where = f"the kubeconfig {kubeconfig}" if kubeconfig else "the in-cluster service account"
    try:
        from governor.adapters.providers.kube_auth import LoadedCredentials  # kubernetes

        credentials = (
            LoadedCredentials.in_cluster()
            if kubeconfig is None
            else LoadedCredentials.kubeconfig(str(kubeconfig), s.kubernetes_context)
        )
    except ImportError:
        why = (
            f"Kubernetes through {where} needs the official client: pip install "
            "'gpu-governor[kubernetes]' (or set GOVERNOR_KUBERNETES_URL and "
            "GOVERNOR_KUBERNETES_TOKEN)"
        )
    except ProviderError as exc:
        why = f"Kubernetes through {where} cannot be used: {exc}"
    else:
        return KubernetesProvider(credentials, stop_latency_s=s.kubernetes_stop_latency_s)
    if explicit:
        raise ProviderSetupError(why)
    log.warning("%s; the kubernetes provider stays unconfigured", why)
    return None


def _local(s: Settings, _clock: Clock) -> LocalProvider | None:
    if s.local_resume_command is not None and s.local_stop_command is None:
        raise ProviderSetupError(
            "GOVERNOR_LOCAL_RESUME_COMMAND needs GOVERNOR_LOCAL_STOP_COMMAND: a process stopped "
            "by a signal cannot be resumed"
        )
    if s.local_stop_command is None and s.local_stop_signal is None:
        return None
    if s.local_stop_command is not None and s.local_resume_command is not None:
        return LocalCommandProvider(
            stop_command=s.local_stop_command,
            resume_command=s.local_resume_command,
            command_timeout_s=s.local_command_timeout_s,
            stop_latency_s=s.local_stop_latency_s,
        )
    try:
        signum = signal.Signals[s.local_stop_signal or "SIGTERM"]
    except KeyError:
        raise ProviderSetupError(
            f"GOVERNOR_LOCAL_STOP_SIGNAL {s.local_stop_signal!r} is not a signal name "
            "(e.g. SIGTERM, SIGINT)"
        ) from None
    return LocalProvider(
        stop_command=s.local_stop_command,
        stop_signal=signum,
        command_timeout_s=s.local_command_timeout_s,
        stop_latency_s=s.local_stop_latency_s,
    )


PROVIDERS: dict[str, ProviderFactory] = {
    "fake": _fake,
    "runpod": _runpod,
    "vast": _vast,
    "lambda": _lambda,
    "gcp": _gcp,
    "aws": _aws,
    "kubernetes": _kubernetes,
    "local": _local,
}
HOW_TO_CONFIGURE = {
    "runpod": "set GOVERNOR_RUNPOD_API_KEY (or GOVERNOR_RUNPOD_API_KEY_FILE) and restart",
    "vast": "set GOVERNOR_VAST_API_KEY (or GOVERNOR_VAST_API_KEY_FILE) and restart",
    "lambda": "set GOVERNOR_LAMBDA_API_KEY (or GOVERNOR_LAMBDA_API_KEY_FILE) and restart",
    "gcp": "set GOVERNOR_GCP_PROJECT (and GOVERNOR_GCP_RATES) and restart",
    "aws": "set GOVERNOR_AWS_REGION (and GOVERNOR_AWS_RATES), install gpu-governor[aws], "
    "and restart",
    "kubernetes": "set GOVERNOR_KUBERNETES_KUBECONFIG (or KUBECONFIG) and install "
    "gpu-governor[kubernetes], run inside the cluster, or set GOVERNOR_KUBERNETES_URL and "
    "GOVERNOR_KUBERNETES_TOKEN, and restart",
    "local": "set GOVERNOR_LOCAL_STOP_COMMAND or GOVERNOR_LOCAL_STOP_SIGNAL and restart",
    "kueue": "configure the kubernetes provider, set GOVERNOR_KUEUE_ENABLED=true, and restart",
}


def build_providers(settings: Settings, clock: Clock) -> dict[str, AnyProvider]:
    """Every provider whose credentials are configured ("fake" always is); with Kueue
    enabled, "kueue" on the Kubernetes cluster's credentials."""
    built = {name: make(settings, clock) for name, make in PROVIDERS.items()}
    providers = {name: provider for name, provider in built.items() if provider is not None}
    if settings.kueue_enabled:
        cluster = providers.get("kubernetes")
        if not isinstance(cluster, KubernetesProvider):
            raise ProviderSetupError(
                "GOVERNOR_KUEUE_ENABLED needs a Kubernetes cluster: "
                + HOW_TO_CONFIGURE["kubernetes"]
            )
        providers["kueue"] = KueueProvider(
            cluster,
            settings.kueue_controller_name,
            clock,
            stop_latency_s=settings.kubernetes_stop_latency_s,
        )
    return providers


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


def build_notifier(
    settings: Settings, gave_up: Callable[[GaveUp], None] | None = None
) -> Notifier | None:
    """The configured webhooks behind one notifier (none configured: no notifier at all)."""
    if not settings.webhooks:
        return None
    subscriptions = [
        Subscription(
            WebhookSink(
                hook.url,
                hook.kind,
                httpx.Client(timeout=settings.webhook_timeout_s),
                public_url=settings.public_url,
                number=number,
            ),
            Severity(hook.min_severity),
        )
        for number, hook in enumerate(settings.webhooks, start=1)
    ]
    return Notifier(
        subscriptions,
        retry=Retry(
            max_attempts=settings.webhook_max_attempts, backoff_s=settings.webhook_backoff_s
        ),
        dedupe_window_s=settings.webhook_dedupe_window_s,
        gave_up=gave_up,
    )


def _trusted_proxies(setting: str) -> tuple[Network, ...]:
    try:
        return trusted_networks(setting.split(","))
    except ValueError as exc:
        raise ValueError(f"GOVERNOR_TRUSTED_PROXIES: {exc}") from None


def build_context(settings: Settings, clock: Clock | None = None) -> ServiceContext:
    clock = clock or SystemClock()
    engine = build_engine(
        settings.database_url,
        pool_size=settings.database_pool_size,
        max_overflow=settings.database_max_overflow,
    )
    sessions = session_factory(engine)
    notifier = build_notifier(settings, undelivered.recorder(sessions, clock))
    providers = build_providers(settings, clock)
    if notifier is not None:
        route_events(sessions, notifier)
    return ServiceContext(
        engine=engine,
        sessions=sessions,
        clock=clock,
        providers=providers,
        auth_limits=AuthLimits(per_source=settings.auth_failures_per_minute),
        write_limits=WriteLimiter(
            {
                WriteKind.HEARTBEAT: settings.heartbeats_per_minute,
                WriteKind.EVENT: settings.events_per_minute,
                WriteKind.EXTENSION: settings.extension_requests_per_minute,
            }
        ),
        unconfigured={n: how for n, how in HOW_TO_CONFIGURE.items() if n not in providers},
        config=GovernorConfig(
            enforce_interval_s=settings.enforce_interval_s,
            finished_linger_s=settings.finished_linger_s,
            resume_grace_s=settings.resume_grace_s,
            watch=Watch(
                idle_util_pct=settings.idle_util_pct,
                idle_window_s=settings.idle_window_s,
                stall_window_s=settings.stall_window_s,
                compile_allowance_s=settings.compile_allowance_s,
                headroom_pct=settings.headroom_pct,
            ),
            telemetry_interval_s=settings.telemetry_interval_s,
            billing_interval_s=settings.billing_interval_s,
            billing_lag_window_s=settings.billing_lag_window_s,
            telemetry_raw_keep_s=settings.telemetry_raw_keep_s,
            telemetry_minute_keep_s=settings.telemetry_minute_keep_s,
            event_keep_s=settings.event_keep_s,
            metrics_require_token=settings.metrics_require_token,
            leader_probe_s=settings.probe_s,
            trusted_proxies=_trusted_proxies(settings.trusted_proxies),
            require_plan=settings.require_plan,
            report_timeline_events=settings.report_timeline_events,
            sweep_rules=tuple(SweepRule.of(r) for r in settings.sweep_rules),
            rate_card=RateCard.of(settings.rate_card),
            gate_default_budgets=dict(settings.gate_default_budgets),
            gate_default_max_hours=settings.gate_default_max_hours,
            launch_reservation_ttl_s=settings.launch_reservation_ttl_s,
            claim_ttl_s=settings.claim_ttl_s,
            kueue_controller_name=settings.kueue_controller_name,
            kueue_interval_s=settings.kueue_interval_s,
            health_rules=tuple(HealthRule.of(r) for r in settings.health_rules),
            exported_run_metrics=tuple(settings.exported_run_metrics),
            failover_s=0.0 if settings.embedded else settings.lease_s + settings.probe_s,
        ),
        ticks=TickLog(enabled=settings.scheduler_enabled),
        lease=Lease(
            sessions,
            clock,
            settings.replica_id,
            settings.lease_s,
            gate=sqlite_scheduler_lock(settings.database_url),
            writes=WriteWatch(
                settings.replica_id, notify=None if notifier is None else notifier.submit
            ),
        ),
        tokens=TokenCache(check_s=settings.enforce_interval_s),
        telemetry=telemetry_source(settings.fake_nvml, clock),
        notifier=notifier,
        identity=build_identity(settings),
        signin=signin_config(settings),
    )


def build_identity(settings: Settings) -> IdentityProvider | None:
    """The OpenID Connect provider people sign in through, if one is configured."""
    if settings.oidc_issuer is None:
        return None
    try:
        from governor.adapters.identity.oidc import OidcProvider
    except ImportError as exc:
        raise SystemExit(
            f"GOVERNOR_OIDC_ISSUER is set but authlib is not installed ({exc}): install the "
            "oidc extra (pip install 'gpu-governor[oidc]')"
        ) from None
    assert settings.oidc_client_id is not None  # checked with the settings
    secret = settings.oidc_client_secret
    return OidcProvider(
        settings.oidc_issuer,
        settings.oidc_client_id,
        None if secret is None else secret.get_secret_value(),
        settings.oidc_scopes.split(),
        settings.oidc_group_claim,
        timeout_s=settings.oidc_timeout_s,
    )


def signin_config(settings: Settings) -> SigninConfig | None:
    """The group map and lifetimes of sign-in through the identity provider, if configured."""
    if settings.oidc_issuer is None:
        return None
    return SigninConfig(
        group_map={g: group_grant(g, raw) for g, raw in settings.oidc_group_roles.items()},
        recheck_s=settings.oidc_recheck_s,
        session_s=settings.oidc_session_s,
        cli_token_s=settings.oidc_cli_token_s,
        public_url=settings.public_url,
        provider_name=settings.oidc_provider_name,
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
        log.info(
            "the embedded database was %s: its schema is now at %s",
            f"at {status.current}" if status.current else "new",
            status.head,
        )
        return
    raise DatabaseBehind(
        f"the database is at revision {status.current or '(empty)'} but this governor needs "
        f"{status.head}: run 'governor migrate' first"
    )


def bootstrap_operator(ctx: ServiceContext, settings: Settings) -> str | None:
    """Register the configured operator token, or generate one on first start (returned once)."""
    configured = settings.operator_token.get_secret_value() if settings.operator_token else None
    try:
        with unit_of_work(ctx.sessions) as session:
            return tokens.bootstrap_operator(session, configured, ctx.clock.now())
    except IntegrityError:  # another replica, starting at the same moment, registered it first
        with unit_of_work(ctx.sessions) as session:
            return tokens.bootstrap_operator(session, configured, ctx.clock.now())


def session_secret(ctx: ServiceContext, settings: Settings) -> bytes:
    """The dashboard's cookie key: the configured one, else the one every replica shares."""
    if settings.session_secret is not None:
        return settings.session_secret.get_secret_value().encode()
    return shared_secrets.shared_secret(ctx.sessions, "session")
