"""Server settings, read from GOVERNOR_* environment variables by load_settings()."""

from __future__ import annotations

import os
import socket
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from governor.domain.health import HealthRule
from governor.domain.identity import GroupGrant
from governor.domain.model import Role
from governor.domain.rate_card import RateCard
from governor.domain.sweep import SweepRule
from governor.provider_settings import ProviderSettings, json_setting

DEFAULT_DATABASE_URL = "sqlite:///governor.db"
MIN_LEASE_S = 2.0
MAX_PROBE_S = 2.0
MAX_EXPORTED_RUN_METRICS = 16  # each a series per live run on /metrics


class Webhook(BaseModel):
    """One webhook sink: where, in which shape, and from which severity up."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(pattern=r"^https?://", description="http:// or https:// address")
    kind: Literal["json", "slack"] = "json"
    min_severity: Literal["warning", "critical"] = "warning"


class Settings(ProviderSettings, BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GOVERNOR_", extra="ignore")

    database_url: str = Field(
        DEFAULT_DATABASE_URL,
        description="SQLAlchemy URL; a SQLite file in the working directory by default.",
    )
    database_pool_size: int = Field(
        10,
        ge=1,
        le=1000,
        description="Database connections each server process keeps open (PostgreSQL and "
        "SQLite alike); size it to the requests it serves at once.",
    )
    database_max_overflow: int = Field(
        20, ge=0, le=1000, description="Connections opened beyond the pool during bursts."
    )
    operator_token: SecretStr | None = Field(
        None, description="Bootstrap operator token; generated and printed once if unset."
    )
    enforce_interval_s: float = Field(
        5.0, gt=0, le=3600, description="Seconds between metering and enforcement passes."
    )
    finished_linger_s: float = Field(
        60.0, ge=0, description="How long a finished run's pod may idle before it is stopped."
    )
    resume_grace_s: float = Field(
        900.0,
        ge=0,
        description="How long a resumed pod with no live run waits for one before it is stopped.",
    )
    scheduler_enabled: bool = Field(
        True, description="Take part in leading the periodic passes (one replica at a time)."
    )
    replica_id: str = Field(
        default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}",
        min_length=1,
        max_length=200,
        description="This replica's name in leadership, logs and /readyz (default host:pid).",
    )
    leader_lease_s: float | None = Field(
        None,
        gt=0,
        le=3600,
        description="A leader that has not renewed its lease this long loses it "
        f"(default: twice the enforce interval, at least {MIN_LEASE_S:g} s).",
    )
    leader_probe_s: float | None = Field(
        None,
        gt=0,
        le=600,
        description="How often each replica renews or tries to take the lease "
        f"(default: a quarter of the lease, at most {MAX_PROBE_S:g} s).",
    )
    require_plan: bool = Field(
        False,
        description="Budgets declared without saying otherwise admit pods only under a plan "
        "whose preflight verdict is not no_go.",
    )
    rate_card: Annotated[dict[str, Any], NoDecode] = Field(
        default_factory=dict,
        description="What the launch gates price GPUs at, beyond the rates registered pods "
        'report: a JSON object of "provider:accelerator", "provider:accelerator:spot", either '
        'optionally followed by "@region", to USD per GPU-hour; the most specific key wins.',
    )
    gate_default_budgets: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description="The budget (its name or id) a gated launch without a governor-budget label "
        'goes to: a JSON object of "user:NAME" or "project:NAME" to a budget; the user\'s wins.',
    )
    gate_default_max_hours: Decimal = Field(
        Decimal(24),
        gt=0,
        le=100_000,
        description="The hours a gated launch is priced for when neither an admitted plan nor "
        "the request (dstack's max_duration) bounds it.",
    )
    launch_reservation_ttl_s: float = Field(
        3600.0,
        gt=0,
        le=30 * 86400,
        description="How long an accepted launch's reservation waits for its pod to register "
        "before it is released.",
    )
    claim_ttl_s: float = Field(
        86400.0,
        gt=0,
        le=30 * 86400,
        description="How long an accepted launch's one-time claim secret (GOVERNOR_CLAIM) may be "
        "exchanged for its run's id and job token.",
    )
    webhook_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="Serve the Kubernetes validating admission webhook over TLS on this port "
        "(beside the API, same address); it carries the admission route alone. Off when unset.",
    )
    webhook_cert_file: Path | None = Field(
        None, description="The admission webhook's TLS certificate (PEM, with its chain)."
    )
    webhook_key_file: Path | None = Field(
        None, description="The admission webhook certificate's key (PEM)."
    )
    webhook_client_ca_file: Path | None = Field(
        None,
        description="When set, the admission webhook requires a client certificate signed by "
        "this CA "
        "(PEM): the API server's (its AdmissionConfiguration's kubeconfig names it).",
    )
    webhook_on_error: Literal["deny", "allow"] = Field(
        "deny",
        description="What the admission webhook answers when it cannot decide in time (the "
        "database "
        "unreachable or slow): deny (fail closed) or allow; the message says which.",
    )
    webhook_decide_s: float = Field(
        5.0,
        gt=0,
        le=29,
        description="How long the admission webhook may take to decide before it answers per "
        "GOVERNOR_WEBHOOK_ON_ERROR; keep it under the ValidatingWebhookConfiguration's "
        "timeoutSeconds.",
    )
    auth_failures_per_minute: int = Field(
        30,
        ge=1,
        le=1_000_000,
        description="Failed authentications one client address (one /64 network for IPv6) may "
        "make in a minute before its failures are answered 429 and its token lookups are paced "
        "(a valid token is never counted).",
    )
    heartbeats_per_minute: int = Field(
        600,
        ge=1,
        le=1_000_000,
        description="Heartbeats one token may send in a minute before it is answered 429.",
    )
    events_per_minute: int = Field(
        60,
        ge=1,
        le=1_000_000,
        description="Events one token may report in a minute before it is answered 429.",
    )
    extension_requests_per_minute: int = Field(
        10,
        ge=1,
        le=1_000_000,
        description="Extension requests one token may file in a minute before it is answered 429.",
    )
    trusted_proxies: str = Field(
        "",
        description="Comma-separated addresses or networks of reverse proxies whose "
        "X-Forwarded-For names the client (for limiting failed sign-ins); none by default.",
    )
    session_secret: SecretStr | None = Field(
        None,
        description="Signs the dashboard's session cookies; unset: made once and kept in the "
        "database, so every replica shares it.",
    )
    oidc_issuer: str | None = Field(
        None,
        description="The OpenID Connect issuer people sign in through "
        "(https://login.example.com/realms/lab); unset: sign-in by pasted token only.",
    )
    oidc_client_id: str | None = Field(None, description="The governor's client id there.")
    oidc_client_secret: SecretStr | None = Field(
        None, description="The client's secret (a confidential client)."
    )
    oidc_scopes: str = Field(
        "openid email profile groups",
        description="The scopes asked for, space-separated; openid among them.",
    )
    oidc_group_claim: str = Field(
        "groups", min_length=1, description="The claim (ID token or userinfo) naming the groups."
    )
    oidc_group_roles: Annotated[dict[str, dict[str, Any]], NoDecode] = Field(
        default_factory=dict,
        description='What each group grants, as JSON: {"ml-platform-admins": {"role": '
        '"operator"}, "team-a": {"role": "operator", "teams": ["team-a"]}}; a person in no '
        "mapped group may not sign in.",
    )
    oidc_provider_name: str = Field(
        "your identity provider",
        min_length=1,
        max_length=60,
        description="What the sign-in button calls the provider (Keycloak, Okta, Google, ...).",
    )
    oidc_recheck_s: float = Field(
        900.0,
        gt=0,
        le=900,
        description="How often a dashboard session is checked again with the provider (at "
        "most 15 minutes): a person removed from their groups loses access then.",
    )
    oidc_session_s: float = Field(
        43200.0, gt=0, le=43200, description="How long a dashboard session lasts (at most 12 h)."
    )
    oidc_cli_token_s: float = Field(
        3600.0,
        gt=0,
        le=3600,
        description="How long a token minted by 'governor login' lasts (at most an hour).",
    )
    oidc_timeout_s: float = Field(
        10.0, gt=0, le=60, description="Seconds one call to the identity provider may take."
    )
    fake_hourly_rate_usd: Decimal = Field(
        Decimal("2.00"), ge=0, description="The rate the fake provider bills its simulated pods at."
    )
    fake_stop_latency_s: float = Field(
        2.0, ge=0, description="How long the fake provider takes to stop a pod."
    )
    fake_stop_failures: int = Field(
        0, ge=0, description="How many stop calls the fake provider fails (retryably) first."
    )
    fake_state_file: Path | None = Field(
        None, description="Where the fake provider keeps its pods across restarts (JSON)."
    )
    fake_billing_factor: Decimal | None = Field(
        None,
        gt=0,
        description="Make the fake provider say what it billed: its bill times this factor.",
    )
    fake_billing_lag_s: float = Field(
        0.0, ge=0, description="How far behind the fake provider's billing runs."
    )
    billing_interval_s: float = Field(
        300.0,
        gt=0,
        le=86_400,
        description="Seconds between asking providers what they billed (RunPod, Vast.ai, GCP "
        "and AWS when their billing is enabled, fake).",
    )
    billing_lag_window_s: float = Field(
        3 * 86_400.0,
        gt=0,
        description="Bills lag: every pod of a budget that had a pod running within this many "
        "seconds is still asked what it was billed, whatever the budget's state, so the last "
        "bill is reconciled after the budget is exhausted or closed.",
    )
    idle_util_pct: float = Field(
        5.0, gt=0, le=100, description="A GPU below this utilization counts as idle."
    )
    idle_window_s: float = Field(
        600.0, gt=0, description="Every GPU idle while holding memory this long: stop the pod."
    )
    stall_window_s: float = Field(
        900.0, gt=0, description="No step progress this long: stop the pod."
    )
    compile_allowance_s: float = Field(
        1800.0,
        gt=0,
        description="How long loading or compiling may go without a step, counted from the "
        "latest step or the start of the run's attempt (its creation or its resume).",
    )
    headroom_pct: float = Field(
        5.0, ge=0, le=100, description="Warn when free GPU memory falls below this share."
    )
    health_rules: Annotated[list[dict[str, Any]], NoDecode] = Field(
        default_factory=list,
        description="Training-health rules every run gets unless it names its own of the same "
        'kind and metric: a JSON list of {"kind", "metric", "action", "window", ...} '
        "(docs/health.md); `non_finite` on `loss` is always on.",
    )
    exported_run_metrics: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated heartbeat metric names (e.g. loss,reward_mean) whose "
        "latest value /metrics exports for each live run; none by default, so the count of "
        f"series stays bounded (at most {MAX_EXPORTED_RUN_METRICS} names).",
    )
    telemetry_interval_s: float = Field(
        5.0, gt=0, le=3600, description="Seconds between polls of this machine's GPUs."
    )
    telemetry_raw_keep_s: float = Field(
        7200.0, gt=0, description="How long every GPU sample is kept before folding to minutes."
    )
    telemetry_minute_keep_s: float = Field(
        7 * 86400.0, gt=0, description="How long per-minute GPU samples are kept."
    )
    event_keep_s: float = Field(
        30 * 86400.0,
        ge=86400,
        description="How long a closed budget's routine events (info observations, never a "
        "decision) are kept one row each before they fold into one line per day and subject.",
    )
    fake_nvml: str | None = Field(
        None, description="Read a scripted fake GPU driver instead of NVML (e.g. 'deadlock')."
    )
    log_level: str = Field("info", description="debug, info, warning or error.")
    access_log: bool = Field(
        False,
        description="Log every HTTP request (a line per heartbeat: off by default at fleet "
        "scale; /metrics counts what matters).",
    )
    metrics_require_token: bool = Field(
        False, description="Serve /metrics to viewer and operator tokens only (open otherwise)."
    )
    report_timeline_events: int = Field(
        200,
        ge=1,
        le=100_000,
        description="The most events a budget report lists in its timeline, the latest (each "
        "failure category lists its latest 10 at most); it says how many it left out. Its "
        "figures count all.",
    )
    max_body_bytes: int = Field(
        1_048_576,
        ge=1024,
        le=1_073_741_824,
        description="The largest request body accepted, in bytes; a longer one is answered 413.",
    )
    webhooks: Annotated[list[Webhook], NoDecode] = Field(
        default_factory=list,
        description="Where warning and critical events are sent: a JSON list of "
        '{"url", "kind": "json"|"slack", "min_severity": "warning"|"critical"}.',
    )
    sweep_rules: Annotated[list[dict[str, Any]], NoDecode] = Field(
        default_factory=list,
        description="What the account sweep does with a billing pod no budget governs, per "
        'provider account: a JSON list of {"provider", "name": glob, "label": key, "value": '
        'glob, and "adopt": budget name or id, or "stop_after_s": grace}; the first rule '
        "that matches a pod decides. Without one, the pod is reported, never stopped.",
    )
    webhook_max_attempts: int = Field(
        5, ge=1, le=20, description="Attempts per event and webhook before giving up."
    )
    webhook_backoff_s: float = Field(
        1.0, gt=0, le=300, description="The wait after a failed attempt; it doubles each time."
    )
    webhook_timeout_s: float = Field(5.0, gt=0, le=60, description="Seconds one POST may take.")
    webhook_dedupe_window_s: float = Field(
        300.0, ge=0, description="An identical message within this many seconds is not resent."
    )
    public_url: str | None = Field(
        None,
        description="The address people open the dashboard at (https://governor.example.com): "
        "notices link to it. No link without it.",
    )

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if not value or not value.strip():
            return None
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")) or value[-3:] == "://":
            raise ValueError(f"must be an http:// or https:// address, not {value!r}")
        return value

    @field_validator("webhooks", mode="before")
    @classmethod
    def _webhooks_json(cls, value: Any) -> Any:
        return json_setting(value, [], "a JSON list of webhooks")

    @field_validator("rate_card", "gate_default_budgets", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        return json_setting(value, {}, "a JSON object")

    @field_validator("rate_card")
    @classmethod
    def _rate_card_valid(cls, raw: dict[str, Any]) -> dict[str, Any]:
        RateCard.of(raw)  # ValueError, naming the key, for a bad key or rate
        return raw

    @field_validator("gate_default_budgets")
    @classmethod
    def _default_budgets_valid(cls, raw: dict[str, str]) -> dict[str, str]:
        for key in raw:
            kind, _, name = key.partition(":")
            if kind not in ("user", "project") or not name:
                raise ValueError(f"{key!r}: want user:NAME or project:NAME")
        return raw

    @field_validator("exported_run_metrics", mode="before")
    @classmethod
    def _metric_names(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return [name.strip() for name in value.split(",") if name.strip()]

    @field_validator("exported_run_metrics")
    @classmethod
    def _metric_names_valid(cls, names: list[str]) -> list[str]:
        if len(names) > MAX_EXPORTED_RUN_METRICS:
            raise ValueError(
                f"{len(names)} names: at most {MAX_EXPORTED_RUN_METRICS}, each a series per run"
            )
        for name in names:
            if len(name) > 100 or not name.isprintable():
                raise ValueError(f"not a metric name: {name!r} (printable, at most 100 characters)")
        return list(dict.fromkeys(names))

    @field_validator("health_rules", mode="before")
    @classmethod
    def _health_rules_json(cls, value: Any) -> Any:
        return json_setting(value, [], "a JSON list of health rules")

    @field_validator("health_rules")
    @classmethod
    def _health_rules_valid(cls, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for raw in rules:
            try:
                HealthRule.of(raw)
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"not a health rule: {raw!r} ({exc!r})") from None
        return rules

    @field_validator("oidc_group_roles", mode="before")
    @classmethod
    def _group_roles_json(cls, value: Any) -> Any:
        return json_setting(value, {}, "a JSON object of groups")

    @field_validator("oidc_group_roles")
    @classmethod
    def _group_roles_valid(cls, groups: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for group, raw in groups.items():
            group_grant(group, raw)
        return groups

    @model_validator(mode="after")
    def _oidc_complete(self) -> Settings:
        if self.oidc_issuer is None:
            return self
        if not self.oidc_issuer.startswith(("https://", "http://")):
            raise ValueError(f"GOVERNOR_OIDC_ISSUER must be an address, not {self.oidc_issuer!r}")
        if not self.oidc_client_id:
            raise ValueError("GOVERNOR_OIDC_ISSUER is set: set GOVERNOR_OIDC_CLIENT_ID too")
        if "openid" not in self.oidc_scopes.split():
            raise ValueError("GOVERNOR_OIDC_SCOPES must include openid")
        if not self.oidc_group_roles:
            raise ValueError(
                "GOVERNOR_OIDC_ISSUER is set: set GOVERNOR_OIDC_GROUP_ROLES too (no group "
                "mapped, nobody could sign in)"
            )
        return self

    @field_validator("sweep_rules", mode="before")
    @classmethod
    def _sweep_rules_json(cls, value: Any) -> Any:
        return json_setting(value, [], "a JSON list of sweep rules")

    @field_validator("sweep_rules")
    @classmethod
    def _sweep_rules_valid(cls, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for raw in rules:
            try:
                SweepRule.of(raw)
            except ValueError as exc:
                raise ValueError(f"not a sweep rule: {raw!r} ({exc})") from None
        return rules

    @field_validator("database_url")
    @classmethod
    def _driver(cls, url: str) -> str:
        for prefix in ("postgres://", "postgresql://"):
            if url.startswith(prefix):
                return "postgresql+psycopg://" + url[len(prefix) :]
        return url

    @model_validator(mode="after")
    def _webhook_complete(self) -> Settings:
        if self.webhook_port is None:
            return self
        if self.webhook_cert_file is None or self.webhook_key_file is None:
            raise ValueError(
                "GOVERNOR_WEBHOOK_PORT is set: set GOVERNOR_WEBHOOK_CERT_FILE and "
                "GOVERNOR_WEBHOOK_KEY_FILE too (the webhook is served over TLS only)"
            )
        return self

    @model_validator(mode="after")
    def _probe_within_lease(self) -> Settings:
        if self.probe_s * 2 > self.lease_s:
            raise ValueError(
                f"GOVERNOR_LEADER_PROBE_S ({self.probe_s:g}) must be at most half the "
                f"leader lease ({self.lease_s:g} s): a leader renews several times per lease"
            )
        return self

    @property
    def lease_s(self) -> float:
        return self.leader_lease_s or max(MIN_LEASE_S, 2 * self.enforce_interval_s)

    @property
    def probe_s(self) -> float:
        return self.leader_probe_s or min(MAX_PROBE_S, self.lease_s / 4)

    @property
    def embedded(self) -> bool:
        return self.database_url.startswith("sqlite")


def group_grant(group: str, raw: Any) -> GroupGrant:
    """One group's entry of GOVERNOR_OIDC_GROUP_ROLES: {"role": ..., "teams": [...]}."""
    if not isinstance(raw, dict) or set(raw) - {"role", "teams"} or "role" not in raw:
        raise ValueError(f'group {group!r}: give {{"role": ..., "teams": [...]}}, not {raw!r}')
    teams = raw.get("teams")
    if teams is not None and not (
        isinstance(teams, list) and all(isinstance(t, str) and t for t in teams)
    ):
        raise ValueError(f"group {group!r}: teams is a list of team names, not {teams!r}")
    try:
        return GroupGrant(Role(raw["role"]), None if teams is None else tuple(teams))
    except ValueError as exc:
        raise ValueError(f"group {group!r}: {exc}") from None


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment, with explicit overrides on top."""
    return Settings(**overrides)
