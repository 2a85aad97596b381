"""The tables. Rows here are storage shapes; the domain and the API have their own."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    false,
    text,
    true,
)
from sqlalchemy import Enum as SAEnum
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from governor.db.types import MicroUSD, OptionalJSON, UTCDateTime
from governor.domain.model import (
    Action,
    BudgetState,
    Category,
    ChargeKind,
    EntryKind,
    ExtensionState,
    Phase,
    PodState,
    RateSource,
    Reason,
    Requester,
    Role,
    RunStatus,
    Severity,
)
from governor.domain.money import ZERO
from governor.domain.preflight.rules import Verdict
from governor.domain.stop_order import StopState
from governor.domain.teams import DEFAULT_TEAM_ID, DEFAULT_TIME_ZONE, PeriodKind

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# 64 bits: BIGINT on PostgreSQL; SQLite's INTEGER holds 64 bits already (and only an INTEGER
# primary key counts up by itself)
Int64 = BigInteger().with_variant(Integer, "sqlite")


def _enum(enum: type[StrEnum]) -> SAEnum:
    return SAEnum(
        enum,
        native_enum=False,
        create_constraint=False,
        length=24,
        values_callable=lambda members: [m.value for m in members],
    )


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)

    if TYPE_CHECKING:
        # Each row class here is mapped to a Table of its own (by __tablename__), never to
        # another kind of FromClause, which is all SQLAlchemy's base can promise.
        __table__: ClassVar[Table]


class TeamRow(Base):
    """A team of the organisation: it holds budgets; its periods run in its time zone."""

    __tablename__ = "teams"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    time_zone: Mapped[str] = mapped_column(
        String(64), default=DEFAULT_TIME_ZONE, server_default=DEFAULT_TIME_ZONE
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # the most an extension may be that the team's own operators and approvers approve; over
    # it, an org-wide one must (None: no such limit)
    org_approval_over_usd: Mapped[Decimal | None] = mapped_column(MicroUSD)
    # the team's ceiling per period, declared once in writing (none: no ceiling above budgets)
    ceiling_usd: Mapped[Decimal | None] = mapped_column(MicroUSD)
    period: Mapped[PeriodKind | None] = mapped_column(_enum(PeriodKind))
    period_days: Mapped[int | None]
    ceiling_declared_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # the start of the period in which the team reached its ceiling: held until it ends
    held_from: Mapped[datetime | None] = mapped_column(UTCDateTime)


class TeamExtensionRow(Base):
    """A request to raise a team's ceiling for one period, and its decision."""

    __tablename__ = "team_extensions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    team_id: Mapped[str] = mapped_column(ForeignKey("teams.id"), index=True)
    period_start: Mapped[datetime] = mapped_column(UTCDateTime)
    amount_usd: Mapped[Decimal] = mapped_column(MicroUSD)
    reason: Mapped[str] = mapped_column(Text)
    requested_by: Mapped[str] = mapped_column(Text)
    state: Mapped[ExtensionState] = mapped_column(_enum(ExtensionState))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    decided_by: Mapped[str | None] = mapped_column(Text)
    decision_note: Mapped[str | None] = mapped_column(Text)


class BudgetRow(Base):
    __tablename__ = "budgets"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    # a budget declared without a team belongs to the default team (the database's default,
    # so that rows written for an older schema never name the column)
    team_id: Mapped[str] = mapped_column(
        ForeignKey("teams.id"), index=True, server_default=DEFAULT_TEAM_ID
    )
    name: Mapped[str] = mapped_column(String(200))
    ceiling_usd: Mapped[Decimal] = mapped_column(MicroUSD)
    reserve_usd: Mapped[Decimal] = mapped_column(MicroUSD)
    storage_tail_hours: Mapped[float]
    alert_thresholds: Mapped[list[int]] = mapped_column(JSON)
    note: Mapped[str | None] = mapped_column(Text)
    state: Mapped[BudgetState] = mapped_column(_enum(BudgetState))
    alerted_pct: Mapped[int] = mapped_column(default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # the running total of the budget's ledger, moved with every entry written
    recorded_usd: Mapped[Decimal] = mapped_column(MicroUSD, default=ZERO, server_default="0")
    # the figures as of the latest enforcement pass: what a heartbeat answers with
    figures_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    figures_spent_usd: Mapped[Decimal | None] = mapped_column(MicroUSD)
    figures_shutdown_usd: Mapped[Decimal | None] = mapped_column(MicroUSD)
    figures_storage_tail_usd: Mapped[Decimal | None] = mapped_column(MicroUSD)
    figures_ceiling_usd: Mapped[Decimal | None] = mapped_column(MicroUSD)
    figures_burn_usd_per_hour: Mapped[Decimal | None] = mapped_column(MicroUSD)
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # pods (and their runs) only under an admitted plan
    require_plan: Mapped[bool] = mapped_column(default=False, server_default=false())
    # the account sweep registers a pod by this budget's label alone (no launch of its named);
    # the database's default, so that rows written for an older schema never name the column
    adopt_labelled_pods: Mapped[bool] = mapped_column(server_default=false())

    # a name names one budget among those not closed: a closed budget's name may be used again
    __table_args__ = (
        Index(
            "uq_budgets_open_name",
            "name",
            unique=True,
            sqlite_where=text("state <> 'closed'"),
            postgresql_where=text("state <> 'closed'"),
        ),
    )


class PodRow(Base):
    __tablename__ = "pods"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    budget_id: Mapped[str] = mapped_column(ForeignKey("budgets.id"), index=True)
    provider: Mapped[str] = mapped_column(String(40))
    provider_ref: Mapped[str] = mapped_column(String(200))
    name: Mapped[str] = mapped_column(String(200))  # unique within its budget
    gpu_type: Mapped[str | None] = mapped_column(String(100))
    gpu_count: Mapped[int | None]
    hourly_rate_usd: Mapped[Decimal] = mapped_column(MicroUSD)
    rate_source: Mapped[RateSource] = mapped_column(_enum(RateSource))
    storage_gb: Mapped[float]
    storage_usd_per_gb_month: Mapped[Decimal] = mapped_column(MicroUSD)
    stopped_storage_usd_per_gb_month: Mapped[Decimal] = mapped_column(MicroUSD)
    stop_latency_s: Mapped[float]  # the provider's declared figure, when the pod was registered
    # where the provider runs it (its region, when the provider says): with the provider, the
    # key its stop latency is learned under (stop_times)
    region: Mapped[str | None] = mapped_column(String(100))
    # what its provider and region's latest stops teach (stop_latency.learned_s; None: fewer
    # than five), and how many stops that figure, or the count so far, comes from
    learned_stop_latency_s: Mapped[float | None]
    learned_from_stops: Mapped[int] = mapped_column(server_default="0")
    local: Mapped[bool] = mapped_column(default=False, server_default=false())
    node: Mapped[str | None] = mapped_column(String(253), index=True)  # the machine it runs on
    plan_id: Mapped[str | None] = mapped_column(ForeignKey("plan_checks.id"))  # its binding plan
    # the launch a gate accepted that it came from (its reservation released when it registered)
    launch_id: Mapped[str | None] = mapped_column(ForeignKey("launches.id"), index=True)
    # its GPUs seen not to match what it was registered with (warned once)
    hardware_warned: Mapped[bool] = mapped_column(default=False, server_default=false())
    # no stop call works for it (a terminate-only provider, a one-time Spot instance): it is
    # terminated, and only after a checkpoint on the persistent filesystem it must land on
    terminate_only: Mapped[bool] = mapped_column(server_default=false())
    persistent_filesystem: Mapped[str | None] = mapped_column(String(200))
    persistent_mount: Mapped[str | None] = mapped_column(Text)
    # what its provider said a stop (or terminate) loses, and an operator's written
    # acknowledgement of that loss, which let it register (with who wrote it)
    cannot_preserve: Mapped[str | None] = mapped_column(Text)
    loss_acknowledged: Mapped[str | None] = mapped_column(Text)
    loss_acknowledged_by: Mapped[str | None] = mapped_column(Text)
    # billing reconciliation: the first billed figure covering registration, and the latest
    billed_baseline_usd: Mapped[Decimal | None] = mapped_column(MicroUSD)
    billed_baseline_through: Mapped[datetime | None] = mapped_column(UTCDateTime)
    billed_usd: Mapped[Decimal | None] = mapped_column(MicroUSD)
    billed_through: Mapped[datetime | None] = mapped_column(UTCDateTime)
    billing_drift: Mapped[bool] = mapped_column(default=False, server_default=false())
    # its rate seen departing from its plan's quote by more than the contingency (warned once)
    plan_rate_warned_usd: Mapped[Decimal | None] = mapped_column(MicroUSD)
    telemetry_note: Mapped[str | None] = mapped_column(Text)
    lost_gpus: Mapped[list[str] | None] = mapped_column(OptionalJSON)
    # the GPUs that are the pod's, by UUID, on a machine it shares; None: all it reports
    gpu_uuids: Mapped[list[str] | None] = mapped_column(OptionalJSON)
    # its processes there, by PID and/or a pattern of their names; None: every process
    process_pids: Mapped[list[int] | None] = mapped_column(OptionalJSON)
    process_pattern: Mapped[str | None] = mapped_column(String(200))
    state: Mapped[PodState] = mapped_column(_enum(PodState))
    # `state_known` False while the provider's word for its state (`provider_state`) is none
    # the provider documents: `state` is then the last known one, and its compute accrues as
    # running; `provider_state` is None while the state is known
    provider_state: Mapped[str | None] = mapped_column(String(64))
    state_known: Mapped[bool] = mapped_column(server_default=true())  # set by registration
    accrued_until: Mapped[datetime] = mapped_column(UTCDateTime)
    # the running total of the pod's ledger entries, moved with every entry written
    recorded_usd: Mapped[Decimal] = mapped_column(MicroUSD, default=ZERO, server_default="0")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    stopped_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    resumed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # the latest resume asked
    released_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # its storage deleted

    __table_args__ = (
        Index("uq_pods_provider_ref", "provider", "provider_ref", unique=True),
        Index("uq_pods_budget_id_name", "budget_id", "name", unique=True),
        Index("ix_pods_state_budget_id", "state", "budget_id"),
    )


class RunRow(Base):
    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    budget_id: Mapped[str] = mapped_column(ForeignKey("budgets.id"), index=True)
    pod_id: Mapped[str] = mapped_column(ForeignKey("pods.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    attempt: Mapped[int] = mapped_column(default=1, server_default="1")  # N+1 after a resume
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)  # when this attempt began
    total_steps: Mapped[int | None] = mapped_column(Int64)
    heartbeat_timeout_s: Mapped[float]
    checkpoint_grace_s: Mapped[float]
    step: Mapped[int] = mapped_column(Int64, default=0)
    phase: Mapped[Phase | None] = mapped_column(_enum(Phase))
    phase_since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    progress_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    policy: Mapped[dict[str, float | str] | None] = mapped_column(OptionalJSON)
    status: Mapped[RunStatus] = mapped_column(_enum(RunStatus))
    last_heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    checkpoint_step: Mapped[int | None] = mapped_column(Int64)
    checkpoint_path: Mapped[str | None] = mapped_column(Text)
    checkpoint_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    directive: Mapped[Action] = mapped_column(_enum(Action))
    directive_reason: Mapped[Reason | None] = mapped_column(_enum(Reason))
    directive_message: Mapped[str | None] = mapped_column(Text)
    checkpoint_asked: Mapped[bool] = mapped_column(default=False)
    # its team's pre-stop checkpoint was asked for: a flag of its own, so the budget's and the
    # team's each ask once
    team_checkpoint_asked: Mapped[bool] = mapped_column(default=False, server_default=false())
    forecast_warned: Mapped[bool] = mapped_column(default=False)
    idle_alerted: Mapped[bool] = mapped_column(default=False, server_default=false())
    stall_alerted: Mapped[bool] = mapped_column(default=False, server_default=false())
    headroom_warned: Mapped[bool] = mapped_column(default=False, server_default=false())
    oom_warned: Mapped[bool] = mapped_column(default=False, server_default=false())
    # its job reported running out of memory: its measured floors are of a run that did
    out_of_memory: Mapped[bool] = mapped_column(default=False, server_default=false())
    metrics: Mapped[dict[str, Any] | None] = mapped_column(OptionalJSON)
    # training health: the run's rules, their running statistics, a stop they asked for
    health_rules: Mapped[list[dict[str, Any]] | None] = mapped_column(OptionalJSON)
    health_state: Mapped[dict[str, Any] | None] = mapped_column(OptionalJSON)
    health_stop: Mapped[dict[str, Any] | None] = mapped_column(OptionalJSON)
    pace_step: Mapped[int | None] = mapped_column(Int64)
    pace_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # a lost run seen to by an operator: it no longer needs one first (until lost again)
    acknowledged_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    acknowledged_by: Mapped[str | None] = mapped_column(Text)


class RunPhaseRow(Base):
    """A phase a run's job reported, from the instant it said so: the report splits spend by it."""

    __tablename__ = "run_phases"

    id: Mapped[int] = mapped_column(Int64, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), index=True)
    phase: Mapped[Phase] = mapped_column(_enum(Phase))
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    step: Mapped[int | None] = mapped_column(Int64)  # the run's step when it said so


class LedgerEntryRow(Base):
    __tablename__ = "ledger_entries"
    # the cost export and a team's period read the entries by the hour they start, in order
    __table_args__ = (Index("ix_ledger_entries_period_start_id", "period_start", "id"),)

    id: Mapped[int] = mapped_column(Int64, primary_key=True, autoincrement=True)
    budget_id: Mapped[str] = mapped_column(ForeignKey("budgets.id"), index=True)
    pod_id: Mapped[str] = mapped_column(ForeignKey("pods.id"), index=True)
    kind: Mapped[EntryKind] = mapped_column(_enum(EntryKind))
    charge: Mapped[ChargeKind] = mapped_column(_enum(ChargeKind))
    amount_usd: Mapped[Decimal] = mapped_column(MicroUSD)
    period_start: Mapped[datetime] = mapped_column(UTCDateTime)
    period_end: Mapped[datetime] = mapped_column(UTCDateTime)
    note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ExtensionRow(Base):
    __tablename__ = "extensions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    budget_id: Mapped[str] = mapped_column(ForeignKey("budgets.id"), index=True)
    amount_usd: Mapped[Decimal] = mapped_column(MicroUSD)
    reason: Mapped[str] = mapped_column(Text)
    requested_by: Mapped[Requester] = mapped_column(_enum(Requester))
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id"))
    state: Mapped[ExtensionState] = mapped_column(_enum(ExtensionState))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    decision_note: Mapped[str | None] = mapped_column(Text)


class StopOrderRow(Base):
    __tablename__ = "stop_orders"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    budget_id: Mapped[str] = mapped_column(ForeignKey("budgets.id"), index=True)
    pod_id: Mapped[str] = mapped_column(ForeignKey("pods.id"), index=True)
    reason: Mapped[Reason] = mapped_column(_enum(Reason))
    state: Mapped[StopState] = mapped_column(_enum(StopState))
    deadline: Mapped[datetime] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    notified_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    acked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    ack_checkpoint: Mapped[dict[str, Any] | None] = mapped_column(OptionalJSON)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    confirmed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    alerted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # last "held" alert
    # The provider's retryable refusals of this stop, for the stop's time (`stop_times`): how
    # many; the refused request whose retry has not gone yet; when the request after the
    # latest refusal went; the longest span from a refused request to the next.
    refusals: Mapped[int] = mapped_column(default=0, server_default="0")
    refused_request_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    retried_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    longest_retry_s: Mapped[float] = mapped_column(default=0.0, server_default="0")

    __table_args__ = (
        Index(
            "uq_stop_orders_active_pod",
            "pod_id",
            unique=True,
            sqlite_where=text("state NOT IN ('stopped', 'failed')"),
            postgresql_where=text("state NOT IN ('stopped', 'failed')"),
        ),
    )


class StopTimeRow(Base):
    """One completed stop: how long the provider took from the governor's first request to
    the pod confirmed stopped (retries inside it). The latest LEARN_FROM_LAST of each provider
    and region are kept (`services/stopping/stop_times.py`)."""

    __tablename__ = "stop_times"

    id: Mapped[int] = mapped_column(Int64, primary_key=True, autoincrement=True)
    provider: Mapped[str] = mapped_column(String(40))
    region: Mapped[str | None] = mapped_column(String(100))
    pod_id: Mapped[str] = mapped_column(ForeignKey("pods.id"))
    stop_order_id: Mapped[str] = mapped_column(ForeignKey("stop_orders.id"))
    sent_at: Mapped[datetime] = mapped_column(UTCDateTime)
    stopped_at: Mapped[datetime] = mapped_column(UTCDateTime)
    seconds: Mapped[float]
    attempts: Mapped[int]
    refusals: Mapped[int] = mapped_column(default=0, server_default="0")  # see StopTime
    retrying_s: Mapped[float] = mapped_column(default=0.0, server_default="0")
    longest_retry_s: Mapped[float] = mapped_column(default=0.0, server_default="0")

    __table_args__ = (Index("ix_stop_times_provider_region", "provider", "region", "id"),)


class UngovernedPodRow(Base):
    """A billing pod a provider account lists that no budget governs, as the account sweep
    last saw it (`services/fleet/sweep.py`); deleted once it is governed, stops billing or
    is no longer listed."""

    __tablename__ = "ungoverned_pods"

    provider: Mapped[str] = mapped_column(String(40), primary_key=True)
    provider_ref: Mapped[str] = mapped_column(String(200), primary_key=True)
    name: Mapped[str | None] = mapped_column(String(200))
    labels: Mapped[dict[str, str]] = mapped_column(JSON)
    gpu_type: Mapped[str | None] = mapped_column(String(100))
    gpu_count: Mapped[int | None]
    hourly_rate_usd: Mapped[Decimal | None] = mapped_column(MicroUSD)
    reason: Mapped[str] = mapped_column(Text)  # why no budget governs it
    launch_id: Mapped[str | None] = mapped_column(String(200))  # its launch label's value
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime)
    stop_after_s: Mapped[float | None]  # the grace of the stop rule that matches it
    stop_sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # the rule's stop sent
    stop_detail: Mapped[str | None] = mapped_column(Text)  # what the provider answered


class EventRow(Base):
    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Int64, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    severity: Mapped[Severity] = mapped_column(_enum(Severity))
    category: Mapped[Category] = mapped_column(_enum(Category))
    subject: Mapped[str] = mapped_column(String(100))
    budget_id: Mapped[str | None] = mapped_column(ForeignKey("budgets.id"), index=True)
    message: Mapped[str] = mapped_column(Text)
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON)
    count: Mapped[int] = mapped_column(Integer, server_default="1")  # identical ones folded in
    last_at: Mapped[datetime] = mapped_column(UTCDateTime)  # the latest of those
    # an info observation, not a decision: the retention may fold it into its day's count
    routine: Mapped[bool] = mapped_column(server_default=false())
    # null until the retention has looked at a routine event; then how many recorded rows it
    # stands for (1: kept as it was; more: a day's fold)
    folded_rows: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (
        Index("ix_events_subject_last_at", "subject", "last_at"),
        # what the retention has still to look at
        Index(
            "ix_events_routine_unfolded",
            "at",
            sqlite_where=text("routine = 1 AND folded_rows IS NULL"),
            postgresql_where=text("routine AND folded_rows IS NULL"),
        ),
    )


class TokenRow(Base):
    __tablename__ = "tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    role: Mapped[Role] = mapped_column(_enum(Role))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str | None] = mapped_column(String(200))
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id"))
    budget_id: Mapped[str | None] = mapped_column(ForeignKey("budgets.id"))
    pod_id: Mapped[str | None] = mapped_column(ForeignKey("pods.id"))
    node: Mapped[str | None] = mapped_column(String(253))  # a node agent's machine
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # adopted from GOVERNOR_OPERATOR_TOKEN: the only one of its kind once rotated
    bootstrap: Mapped[bool] = mapped_column(default=False, server_default=false())
    # a person's, minted at their sign-in through the identity provider: who they are there
    # (the teams their groups grant are the token's teams, as for any token)
    subject: Mapped[str | None] = mapped_column(String(255))
    email: Mapped[str | None] = mapped_column(String(320))

    # every replica's token cache asks for the tokens revoked lately, once an interval
    __table_args__ = (Index("ix_tokens_revoked_at", "revoked_at"),)


class TokenTeamRow(Base):
    """A team an operator's, approver's or viewer's token is for. A token with none is for
    every team (org-wide), as every token made before teams existed is."""

    __tablename__ = "token_teams"

    token_id: Mapped[str] = mapped_column(ForeignKey("tokens.id"), primary_key=True)
    team_id: Mapped[str] = mapped_column(ForeignKey("teams.id"), primary_key=True)


class SigninRow(Base):
    """A dashboard session opened through the identity provider: the token it acts with, and
    the refresh token the governor asks the provider again with (at least every re-check
    interval; a person the provider no longer vouches for loses the token)."""

    __tablename__ = "signins"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    token_id: Mapped[str] = mapped_column(ForeignKey("tokens.id"), unique=True)
    refresh_token: Mapped[str] = mapped_column(Text)
    checked_at: Mapped[datetime] = mapped_column(UTCDateTime)  # the provider's latest word
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # a re-check under way
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class LeaseRow(Base):
    """Who leads some work across replicas: a term that only grows, and until when it holds."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(50), primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(200))
    term: Mapped[int] = mapped_column(BigInteger, server_default="0")
    since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    renewed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    resumed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # after the last gap
    ticks: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # task -> last success


class SecretRow(Base):
    """A secret every replica must share (the dashboard's cookie key), made once."""

    __tablename__ = "secrets"

    name: Mapped[str] = mapped_column(String(50), primary_key=True)
    value: Mapped[str] = mapped_column(String(200))


class GpuSampleRow(Base):
    """One GPU at one poll (`raw`), or a minute of polls folded together (`minute`)."""

    __tablename__ = "gpu_samples"

    id: Mapped[int] = mapped_column(Int64, primary_key=True, autoincrement=True)
    pod_id: Mapped[str] = mapped_column(ForeignKey("pods.id"))
    gpu_uuid: Mapped[str] = mapped_column(String(100))
    gpu_index: Mapped[int]
    name: Mapped[str] = mapped_column(String(100))
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    resolution: Mapped[str] = mapped_column(String(8))
    utilization_pct: Mapped[float | None]
    utilization_max_pct: Mapped[float | None]
    memory_total_bytes: Mapped[int | None] = mapped_column(BigInteger)
    memory_used_bytes: Mapped[int | None] = mapped_column(BigInteger)
    memory_free_bytes: Mapped[int | None] = mapped_column(BigInteger)
    power_w: Mapped[float | None]
    temperature_c: Mapped[float | None]
    processes: Mapped[list[dict[str, Any]] | None] = mapped_column(OptionalJSON)
    clock_event_reasons: Mapped[int | None] = mapped_column(BigInteger)

    __table_args__ = (Index("ix_gpu_samples_pod_gpu_at", "pod_id", "gpu_uuid", "at"),)


class RunMetricRow(Base):
    """One metric of a run's heartbeat (`raw`), or a minute of them folded together (`minute`:
    the mean, with the least and the most)."""

    __tablename__ = "run_metrics"

    id: Mapped[int] = mapped_column(Int64, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"))
    name: Mapped[str] = mapped_column(String(100))
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    step: Mapped[int] = mapped_column(Int64)
    resolution: Mapped[str] = mapped_column(String(8))
    value: Mapped[float]
    least: Mapped[float]
    most: Mapped[float]

    __table_args__ = (
        Index("ix_run_metrics_run_name_at", "run_id", "name", "at"),
        Index("ix_run_metrics_resolution_at", "resolution", "at"),
    )


class GpuPeakRow(Base):
    """The most memory a GPU held while a run was live on its pod."""

    __tablename__ = "gpu_peaks"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), primary_key=True)
    gpu_uuid: Mapped[str] = mapped_column(String(100), primary_key=True)
    gpu_name: Mapped[str] = mapped_column(String(100))
    peak_used_bytes: Mapped[int] = mapped_column(BigInteger)
    memory_total_bytes: Mapped[int | None] = mapped_column(BigInteger)
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    # the memory tracked per phase, its growth and jumps (domain.memory_outlook.MemoryTrack)
    track: Mapped[dict[str, Any] | None] = mapped_column(OptionalJSON)


class MeasuredFloorRow(Base):
    """The most memory a GPU held in one phase of a run whose plan names its model: kept with
    the configuration it ran (domain.preflight.measured), a later plan's measured floor."""

    __tablename__ = "measured_floors"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), primary_key=True)
    gpu_uuid: Mapped[str] = mapped_column(String(100), primary_key=True)
    phase: Mapped[str] = mapped_column(String(40), primary_key=True)
    plan_id: Mapped[str] = mapped_column(ForeignKey("plan_checks.id"))
    model_id: Mapped[str] = mapped_column(String(100))
    model_revision: Mapped[str | None] = mapped_column(String(100))
    recipe: Mapped[str] = mapped_column(String(64))  # the recipe's digest
    gpu_name: Mapped[str] = mapped_column(String(100))  # as the GPU reported it
    gpu_count: Mapped[int]  # the plan's GPUs over all nodes
    peak_used_bytes: Mapped[int] = mapped_column(BigInteger)
    at: Mapped[datetime] = mapped_column(UTCDateTime)  # when the peak was reached

    __table_args__ = (Index("ix_measured_floors_model", "model_id", "model_revision"),)


class PlanCheckRow(Base):
    """A preflight verdict on a plan, kept with its budget (and for the run report)."""

    __tablename__ = "plan_checks"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    budget_id: Mapped[str] = mapped_column(ForeignKey("budgets.id"), index=True)
    job_id: Mapped[str] = mapped_column(String(200))
    verdict: Mapped[Verdict] = mapped_column(_enum(Verdict))
    gpu_type: Mapped[str] = mapped_column(String(100))
    modeled_gib: Mapped[float]  # per GPU, with the governor's floors
    usable_gib: Mapped[float]
    worst_case_usd: Mapped[Decimal] = mapped_column(MicroUSD)
    available_usd: Mapped[Decimal] = mapped_column(MicroUSD)
    plan: Mapped[dict[str, Any]] = mapped_column(JSON)
    reasons: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    figures: Mapped[dict[str, Any]] = mapped_column(JSON)  # memory table and cost breakdown
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # the binding: judged against this ceiling (a new one needs a new check), after what the
    # other admitted plans held back; a no_go an operator let through; a plan taken back
    effective_ceiling_usd: Mapped[Decimal | None] = mapped_column(MicroUSD)
    reserved_usd: Mapped[Decimal | None] = mapped_column(MicroUSD)
    override_reason: Mapped[str | None] = mapped_column(Text)
    override_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    withdrawn_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # canary_only: training released, on the measured peak, by telemetry or an operator
    canary_released_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    canary_peak_gib: Mapped[float | None]
    canary_released_by: Mapped[str | None] = mapped_column(Text)
    # its pods' spend seen passing its worst case (warned once)
    worst_case_passed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # the configuration its runs' measured floors are kept under (domain.preflight.measured
    # FloorKey); None: the plan names no model.id, and nothing is kept
    floor_key: Mapped[dict[str, Any] | None] = mapped_column(OptionalJSON)


class LaunchRow(Base):
    """A launch a gate accepted: its reservation (its priced maximum, held back from what the
    next plan or launch may be admitted for until its pod registers, it is withdrawn, or it
    expires) and its run's one-time claim secret, kept hashed."""

    __tablename__ = "launches"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    budget_id: Mapped[str] = mapped_column(ForeignKey("budgets.id"), index=True)
    tool: Mapped[str] = mapped_column(String(40))  # skypilot, dstack
    # what the tool sends that names this launch again (dstack's repeated call): a repeat
    # finds the launch while its reservation is held
    request_key: Mapped[str | None] = mapped_column(String(64), index=True)
    name: Mapped[str | None] = mapped_column(String(200))
    user: Mapped[str | None] = mapped_column(String(200))
    project: Mapped[str | None] = mapped_column(String(200))
    plan_id: Mapped[str | None] = mapped_column(ForeignKey("plan_checks.id"))  # it runs under
    price_usd: Mapped[Decimal] = mapped_column(MicroUSD)  # its priced maximum
    reserved_usd: Mapped[Decimal] = mapped_column(MicroUSD)  # 0 where its plan holds it
    figures: Mapped[dict[str, Any]] = mapped_column(JSON)  # the arithmetic and figures used
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)  # released then without a pod
    released_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    release_reason: Mapped[str | None] = mapped_column(String(40))
    claim_hash: Mapped[str] = mapped_column(String(64), unique=True)
    claim_expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # the run its claim made (no foreign key: runs lead to pods, and pods to launches)
    run_id: Mapped[str | None] = mapped_column(String(32))

    # the reservations still held, for every budget's figures and the expiry pass
    __table_args__ = (Index("ix_launches_released_at_budget_id", "released_at", "budget_id"),)
