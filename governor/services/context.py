"""What every use case receives: sessions, the clock, providers (as ports) and plain config."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import lru_cache
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from governor.db.engine import one_writer, read_only, unit_of_work
from governor.domain.errors import Invalid
from governor.domain.health import HealthRule
from governor.domain.model import OomForesight
from governor.domain.policy import Watch
from governor.domain.ports import AnyProvider, Clock, IdentityProvider
from governor.domain.rate_card import RateCard
from governor.domain.sweep import SweepRule
from governor.domain.telemetry import TelemetrySource
from governor.services.notifications import Notifier
from governor.services.replica.health import TickLog
from governor.services.replica.leadership import Lease
from governor.services.replica.write_watch import WriteWatch
from governor.services.security import callers
from governor.services.security.auth_limits import AuthLimits, Network, client_address
from governor.services.security.signins import SigninConfig
from governor.services.security.tokens import Principal, TokenCache
from governor.services.security.write_limits import WriteLimiter

# What the callers of the use cases (the API, the dashboard, the scheduler) know of storage: a
# session to hand to the use cases (`ServiceContext.unit_of_work`, `.read_only`), and the error
# a database that refuses raises, which they answer as unavailable.
DatabaseRefused = OperationalError
DEFAULT_HEARTBEAT_TIMEOUT_S = 120.0
DEFAULT_CHECKPOINT_GRACE_S = 300.0
REACTION_INTERVALS = 4  # detect, send, poll, confirm: each may wait one enforcement interval


class PassPace:
    """How long this replica's passes on the way to a stop (deciding, stopping) took lately.

    Passes never overlap: one that takes longer than its interval delays the next, so the
    governor's reaction time grows with it, and the committed spend must reserve for that.
    The slowest of the latest `keep` passes counts; thread-safe. It is worked out when a pass
    is recorded (twice an interval), not when read (once a budget in every pass).
    """

    def __init__(self, keep: int = 20) -> None:
        self._took: deque[float] = deque(maxlen=keep)
        self._slowest_s = 0.0
        self._lock = threading.Lock()

    def took(self, seconds: float) -> None:
        with self._lock:
            self._took.append(seconds)
            self._slowest_s = max(self._took)

    def slowest_s(self) -> float:
        return self._slowest_s


@dataclass(frozen=True)
class GovernorConfig:
    enforce_interval_s: float = 5.0
    finished_linger_s: float = 60.0
    resume_grace_s: float = 900.0  # a resumed pod with no live run waits this long for one
    watch: Watch = field(default_factory=Watch)
    telemetry_interval_s: float = 5.0
    telemetry_raw_keep_s: float = 7200.0
    telemetry_minute_keep_s: float = 7 * 86400.0
    fold_interval_s: float = 60.0
    event_keep_s: float = 30 * 86400.0  # a closed budget's routine events, one row each
    event_fold_interval_s: float = 3600.0
    billing_interval_s: float = 300.0  # how often providers are asked what they billed
    # how long after a budget's last running pod its bills are still read (they lag)
    billing_lag_window_s: float = 3 * 86400.0
    metrics_require_token: bool = False  # /metrics for viewer and operator tokens only
    leader_probe_s: float = 2.0  # how often a replica renews or tries to take the lease
    failover_s: float = 0.0  # how long the passes may pause while another replica takes over
    trusted_proxies: tuple[Network, ...] = ()  # whose X-Forwarded-For names the client
    health_rules: tuple[HealthRule, ...] = ()  # the server's defaults for every run
    exported_run_metrics: tuple[str, ...] = ()  # the run metrics /metrics exports, by name
    require_plan: bool = False  # what a budget declared without saying requires
    report_timeline_events: int = 200  # a report's timeline: the latest so many events
    sweep_rules: tuple[SweepRule, ...] = ()  # what the account sweep does with ungoverned pods
    # the launch gates: rates a launch is priced at, the budget a launch without a label goes
    # to (by "user:NAME" or "project:NAME"), the hours one with no plan nor a declared maximum
    # is priced for, how long its reservation waits for its pod and its claim for its job
    rate_card: RateCard = field(default_factory=RateCard, compare=False)
    gate_default_budgets: Mapping[str, str] = field(default_factory=dict, compare=False)
    gate_default_max_hours: Decimal = Decimal(24)
    launch_reservation_ttl_s: float = 3600.0
    claim_ttl_s: float = 86400.0
    # the Kueue admission check controller: the controllerName of the checks it answers, and
    # how often it answers them (and keeps them Active)
    kueue_controller_name: str = "gpu-governor.io/budget"
    kueue_interval_s: float = 10.0
    pace: PassPace = field(default_factory=PassPace, compare=False)  # how long passes take

    def watch_for(self, overrides: dict[str, float | str] | None) -> Watch:
        """A run's GPU and progress thresholds and what a foreseen out-of-memory does: the
        defaults, with its own overrides on top (made once per set of overrides, not once per
        run and pass)."""
        return _watch(self.watch, tuple(sorted((overrides or {}).items())))

    @property
    def reaction_s(self) -> float:
        """How long the governor itself may take between a decision and a confirmed stop: its
        passes, each an interval apart or as long as the slowest lately took when that is
        longer (a busy machine), and a change of leader on the way (replicas on PostgreSQL)."""
        pass_s = max(self.enforce_interval_s, self.pace.slowest_s())
        return REACTION_INTERVALS * pass_s + self.failover_s


@lru_cache(maxsize=1024)
def _watch(defaults: Watch, overrides: tuple[tuple[str, float | str], ...]) -> Watch:
    given: dict[str, Any] = dict(overrides)
    if "oom_foresight" in given:
        given["oom_foresight"] = OomForesight(given["oom_foresight"])
    return replace(defaults, **given)


# A pass works in short transactions, of about this many pods, so that other writers never
# queue behind a whole pass. On SQLite every writer waits for the one that writes, heartbeats
# included: there a transaction is kept to a few hundredths of a second's work.
PODS_PER_TRANSACTION = 500
PODS_PER_TRANSACTION_ONE_WRITER = 100


def batches(budgets: Sequence[tuple[str, int]], pods: int) -> list[list[str]]:
    """Budget ids, in their order, in batches of at most `pods` pods between them (a budget
    with more pods than that is a batch of its own)."""
    cut: list[list[str]] = []
    count = 0
    for budget_id, its_pods in budgets:
        if not cut or count + its_pods > pods:
            cut.append([])
            count = 0
        cut[-1].append(budget_id)
        count += its_pods
    return cut


def first_pods(budgets: Sequence[tuple[str, int]], pods: int) -> list[tuple[str, int]]:
    """The first budgets, in their order, with at most `pods` pods between them (always the
    first budget, however many pods it has)."""
    first = batches(budgets, pods)[:1]
    return list(budgets[: len(first[0])]) if first else []


@dataclass(frozen=True)
class ServiceContext:
    engine: Engine
    sessions: sessionmaker[Session]
    clock: Clock
    providers: Mapping[str, AnyProvider]
    config: GovernorConfig
    ticks: TickLog
    lease: Lease  # this replica's claim on leading the periodic passes
    telemetry: TelemetrySource | None = None  # this machine's GPUs, for pods marked local
    notifier: Notifier | None = None  # webhook sinks for warning and critical events
    unconfigured: Mapping[str, str] = field(default_factory=dict)  # provider -> how to enable
    tokens: TokenCache = field(default_factory=TokenCache)  # who each bearer token is, cached
    auth_limits: AuthLimits = field(default_factory=AuthLimits)  # token lookups, per source
    write_limits: WriteLimiter = field(default_factory=WriteLimiter)  # per token and kind
    identity: IdentityProvider | None = None  # the OpenID Connect provider people sign in at
    signin: SigninConfig | None = None  # its group map and lifetimes (None: not configured)

    def unit_of_work(self) -> AbstractContextManager[Session]:
        """One unit of work: committed once at its end, or rolled back."""
        return unit_of_work(self.sessions)

    def read_only(self) -> AbstractContextManager[Session]:
        """A transaction that only reads: it never waits for a writer, nor makes one wait."""
        return read_only(self.sessions)

    async def caller(
        self,
        token: str | None,
        peer: str | None,
        forwarded_for: str | None,
        in_thread: callers.InThread,
    ) -> Principal:
        """Who calls with this bearer token, over a connection from `peer` (or, from a trusted
        proxy, whom it forwards): `callers.identify`."""
        return await callers.identify(
            token,
            self.clock.now(),
            cache=self.tokens,
            limits=self.auth_limits,
            sessions=self.sessions,
            address=lambda: self.address_of(peer, forwarded_for),
            in_thread=in_thread,
        )

    def address_of(self, peer: str | None, forwarded_for: str | None) -> str:
        """Who is asking, over a connection from `peer` (or, from a trusted proxy, whom it
        forwards): what the limits of `auth_limits` count by."""
        return client_address(peer, forwarded_for, self.config.trusted_proxies)

    def leading(self) -> bool:
        """May this replica act on the world now: does it hold an unexpired lease?"""
        return self.lease.leading

    @property
    def pods_per_transaction(self) -> int:
        """How many pods a pass takes on in one transaction on this database."""
        return PODS_PER_TRANSACTION_ONE_WRITER if one_writer(self.engine) else PODS_PER_TRANSACTION

    @property
    def replica(self) -> str:
        return self.lease.replica

    @property
    def writes(self) -> WriteWatch:
        """Whether this replica's writes commit (the lease's probe, the passes, the API's)."""
        return self.lease.writes

    def provider(self, name: str) -> AnyProvider:
        try:
            return self.providers[name]
        except KeyError:
            if name in self.unconfigured:
                raise Invalid(
                    f"provider {name!r} is not configured: {self.unconfigured[name]}"
                ) from None
            known = ", ".join(sorted(self.providers)) or "none"
            raise Invalid(f"unknown provider {name!r}; configured providers: {known}") from None
