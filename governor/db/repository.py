"""Queries and writes over the tables. Never commits: the unit of work does."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import (
    ARRAY,
    ColumnElement,
    Row,
    Select,
    String,
    and_,
    bindparam,
    column,
    func,
    or_,
    select,
    update,
    values,
)
from sqlalchemy.orm import Session

from governor.db.keyset import Keyset
from governor.db.one_of import one_of
from governor.db.tables import (
    BudgetRow,
    EventRow,
    ExtensionRow,
    GpuPeakRow,
    LaunchRow,
    LedgerEntryRow,
    MeasuredFloorRow,
    PlanCheckRow,
    PodRow,
    RunPhaseRow,
    RunRow,
    StopOrderRow,
    TokenRow,
    UngovernedPodRow,
)
from governor.db.team_scope import budgets_in, tokens_in
from governor.db.types import UTCDateTime
from governor.domain.errors import NotFound
from governor.domain.model import (
    BILLS_COMPUTE,
    BudgetState,
    Category,
    EntryKind,
    ExtensionState,
    Phase,
    PodState,
    RateSource,
    Role,
    RunStatus,
    Severity,
)
from governor.domain.money import ZERO
from governor.domain.notice import at_least
from governor.domain.paging import Page, PageRequest
from governor.domain.stop_order import ACTIVE_STATES
from governor.domain.teams import EVERY_TEAM, TeamScope

_Model = TypeVar("_Model")

# The order of each list the API pages through, the row's id breaking ties.
BUDGETS = Keyset("budgets", (BudgetRow.created_at, BudgetRow.id))
PODS = Keyset("pods", (PodRow.created_at, PodRow.id))
RUNS = Keyset("runs", (RunRow.created_at, RunRow.id))
EXTENSIONS = Keyset("extensions", (ExtensionRow.created_at, ExtensionRow.id))
TOKENS = Keyset("tokens", (TokenRow.created_at, TokenRow.id), descending=True)
EVENTS = Keyset("events", (EventRow.id,), descending=True)
PLAN_CHECKS = Keyset("plans", (PlanCheckRow.created_at, PlanCheckRow.id))


def get_budget(
    session: Session, budget_id: str, *, lock: bool = False, share: bool = False
) -> BudgetRow:
    """The budget. With `lock`, held for update until the transaction ends; with `share`,
    held against writers only, so several reads of its pods and ledger agree with each other.

    Every writer of a budget's ledger takes `lock` first: that is what makes `share` enough.
    (SQLite takes its write lock at BEGIN and needs neither.)
    """
    query = select(BudgetRow).where(BudgetRow.id == budget_id)
    if lock:
        query = query.with_for_update(key_share=True)
    elif share:
        query = query.with_for_update(read=True)
    row = session.scalars(query).one_or_none()
    if row is None:
        raise NotFound(f"no budget {budget_id!r}")
    return row


def budgets_by_id(
    session: Session, budget_ids: Sequence[str], *, lock: bool = False, share: bool = False
) -> Sequence[BudgetRow]:
    """Budgets in `budget_ids` order (missing ones left out); `lock` and `share` as for
    `get_budget`. Rows are locked in id order, so two lockers of overlapping sets never
    deadlock."""
    query = select(BudgetRow).where(BudgetRow.id.in_(budget_ids)).order_by(BudgetRow.id)
    if lock:
        query = query.with_for_update(key_share=True)
    elif share:
        query = query.with_for_update(read=True)
    rows = {row.id: row for row in session.scalars(query)}
    return [rows[i] for i in budget_ids if i in rows]


def lock_budgets(session: Session, budget_ids: Sequence[str]) -> None:
    """Hold these budgets for update until the transaction ends, as `budgets_by_id` with
    `lock` does, without loading them (in id order too, so two lockers never deadlock)."""
    session.execute(
        select(BudgetRow.id)
        .where(one_of(BudgetRow.id, "budget_ids"))
        .order_by(BudgetRow.id)
        .with_for_update(key_share=True),
        {"budget_ids": list(budget_ids)},
    ).all()


def billing_budgets(session: Session) -> Sequence[tuple[str, int]]:
    """The budgets with a pod that bills compute (those an enforcement pass decides about),
    each with how many such pods it has."""
    return pods_by_budget(session, PodRow.state.in_(BILLS_COMPUTE))


def pods_by_budget(session: Session, *where: ColumnElement[bool]) -> Sequence[tuple[str, int]]:
    """The budgets with a pod that meets `where`, in order, each with how many such pods."""
    query = (
        select(PodRow.budget_id, func.count())
        .where(*where)
        .group_by(PodRow.budget_id)
        .order_by(PodRow.budget_id)
    )
    return [(budget_id, pods) for budget_id, pods in session.execute(query)]


def budget_ids(session: Session) -> Sequence[str]:
    """Every budget's id, oldest first."""
    return session.scalars(BUDGETS.ordered(select(BudgetRow.id))).all()


def budgets_page(
    session: Session,
    request: PageRequest,
    *,
    name: str | None = None,
    scope: TeamScope = EVERY_TEAM,
) -> Page[BudgetRow]:
    """A page of the budgets (of the scope's teams), oldest first; with `name`, of those so
    named."""
    query = select(BudgetRow).where(budgets_in(scope, BudgetRow.id))
    if name is not None:
        query = query.where(BudgetRow.name == name)
    return BUDGETS.page(session, query, request)


def open_budget_named(session: Session, name: str) -> BudgetRow | None:
    """The budget not closed that has this name (there is at most one)."""
    return session.scalars(
        select(BudgetRow).where(BudgetRow.name == name, BudgetRow.state != BudgetState.CLOSED)
    ).first()


def _get(session: Session, model: type[_Model], key: str, what: str) -> _Model:
    row = session.get(model, key)
    if row is None:
        raise NotFound(f"no {what} {key!r}")
    return row


def get_pod(session: Session, pod_id: str) -> PodRow:
    row: PodRow = _get(session, PodRow, pod_id, "pod")
    return row


_OfBudget = TypeVar("_OfBudget", PodRow, PlanCheckRow, LaunchRow)


def get_of_budget(
    session: Session,
    model: type[_OfBudget],
    key: str,
    what: str,
    budget_id: str,
    *,
    lock: bool = False,
) -> _OfBudget:
    """The pod, plan or launch `key` names where it is this budget's; NotFound otherwise, worded
    as for one that does not exist (`_get`, `scopes.require_seen`) whether there is none or it
    is another budget's, perhaps another team's: an id in a request confirms nothing of what
    is not the caller's."""
    row = session.get(model, key, with_for_update=lock or None)
    if row is None or row.budget_id != budget_id:
        raise NotFound(f"no {what} {key!r}")
    return row


def get_run(session: Session, run_id: str) -> RunRow:
    row: RunRow = _get(session, RunRow, run_id, "run")
    return row


def run_with(session: Session, run_id: str, *budget_columns: str) -> tuple[RunRow, Any]:
    """The run, and these columns of its budget, in one round trip."""
    row = session.execute(
        select(RunRow, *(BudgetRow.__table__.c[name] for name in budget_columns))
        .join(BudgetRow, BudgetRow.id == RunRow.budget_id)
        .where(RunRow.id == run_id)
    ).one_or_none()
    if row is None:
        raise NotFound(f"no run {run_id!r}")
    return row[0], row


def get_extension(session: Session, extension_id: str) -> ExtensionRow:
    row: ExtensionRow = _get(session, ExtensionRow, extension_id, "extension")
    return row


def pods(
    session: Session,
    request: PageRequest,
    *,
    budget_id: str | None = None,
    name: str | None = None,
    scope: TeamScope = EVERY_TEAM,
) -> Page[PodRow]:
    """A page of pods (of the scope's teams), oldest first; with `budget_id` those of that
    budget, with `name` those so named."""
    query = select(PodRow).where(budgets_in(scope, PodRow.budget_id))
    if budget_id is not None:
        query = query.where(PodRow.budget_id == budget_id)
    if name is not None:
        query = query.where(PodRow.name == name)
    return PODS.page(session, query, request)


def pod_named(session: Session, budget_id: str, name: str) -> PodRow | None:
    return session.scalars(
        select(PodRow).where(PodRow.budget_id == budget_id, PodRow.name == name)
    ).one_or_none()


def pod_by_ref(session: Session, provider: str, ref: str) -> PodRow | None:
    return session.scalars(
        select(PodRow).where(PodRow.provider == provider, PodRow.provider_ref == ref)
    ).one_or_none()


def pods_of(session: Session, budget_id: str) -> Sequence[PodRow]:
    return session.scalars(
        select(PodRow).where(PodRow.budget_id == budget_id).order_by(PodRow.created_at)
    ).all()


def pods_in_state(session: Session, state: PodState) -> Sequence[PodRow]:
    return session.scalars(select(PodRow).where(PodRow.state == state)).all()


def pods_by_id(session: Session, pod_ids: Sequence[str]) -> dict[str, PodRow]:
    """These pods, by id."""
    query = select(PodRow).where(one_of(PodRow.id, "pod_ids"))
    return {p.id: p for p in session.scalars(query, {"pod_ids": list(pod_ids)})}


def runs_by_id(session: Session, run_ids: Sequence[str]) -> dict[str, RunRow]:
    """These runs, by id."""
    query = select(RunRow).where(one_of(RunRow.id, "run_ids"))
    return {r.id: r for r in session.scalars(query, {"run_ids": list(run_ids)})}


def pods_of_budgets(session: Session, budget_ids: Sequence[str]) -> Sequence[PodRow]:
    """The pods of several budgets."""
    query = select(PodRow).where(PodRow.budget_id.in_(budget_ids))
    return session.scalars(query.order_by(PodRow.created_at, PodRow.id)).all()


def pods_not_gone(session: Session) -> Sequence[PodRow]:
    """Every pod that may still be billed: running, stopping or stopped with its storage."""
    return session.scalars(
        select(PodRow).where(PodRow.state != PodState.GONE).order_by(PodRow.created_at)
    ).all()


def provider_refs(session: Session, provider: str) -> set[str]:
    """The refs of every pod of `provider` registered here, in any state."""
    return set(session.scalars(select(PodRow.provider_ref).where(PodRow.provider == provider)))


def budget_keys(session: Session) -> dict[str, str]:
    """Every budget's id, by its id and, for an open budget, by its name (open budgets'
    names are unique)."""
    keys: dict[str, str] = {}
    for budget_id, name, state in session.execute(
        select(BudgetRow.id, BudgetRow.name, BudgetRow.state)
    ):
        keys[budget_id] = budget_id
        if state is BudgetState.OPEN:
            keys.setdefault(name, budget_id)
    return keys


def ungoverned_pods(session: Session, provider: str | None = None) -> Sequence[UngovernedPodRow]:
    """The ungoverned pods the sweep keeps (of one provider), the longest seen first."""
    query = select(UngovernedPodRow).order_by(
        UngovernedPodRow.first_seen_at, UngovernedPodRow.provider, UngovernedPodRow.provider_ref
    )
    if provider is not None:
        query = query.where(UngovernedPodRow.provider == provider)
    return session.scalars(query).all()


def pods_to_reconcile(
    session: Session, since: datetime, providers: Collection[str]
) -> Sequence[Row[str, str, str, str, datetime, datetime | None]]:
    """The pods of `providers` whose bills may still change: every such pod, not released
    before `since`, of a budget that had a pod running at some instant since `since` (whatever
    its state now); each as its id, budget, provider, ref, registration and `billed_through`."""
    ran = select(PodRow.budget_id).where(
        or_(
            PodRow.state.in_((PodState.RUNNING, PodState.STOPPING)),
            PodRow.stopped_at >= since,
            PodRow.resumed_at >= since,
        )
    )
    asked = (PodRow.id, PodRow.budget_id, PodRow.provider, PodRow.provider_ref, PodRow.created_at)
    return session.execute(
        select(*asked, PodRow.billed_through)
        .where(
            PodRow.provider.in_(providers),
            PodRow.budget_id.in_(ran),
            or_(PodRow.state != PodState.GONE, PodRow.released_at >= since),
        )
        .order_by(PodRow.created_at)
    ).all()


class EntriesOver(NamedTuple):
    """Pods' ledger entries over a stretch of time each: what those wholly inside it add up
    to, by pod and kind, and the few that overlap only part of it, by pod."""

    sums: dict[tuple[str, EntryKind], Decimal]
    edges: dict[str, list[LedgerEntryRow]]


def entries_over(
    session: Session, windows: Sequence[tuple[str, datetime, datetime]]
) -> EntriesOver:
    """The ledger entries of each (pod id, start, end) over [start, end], in two statements
    whatever the number of pods; those wholly inside are summed by the database (a pod's life
    is thousands of hourly entries). On PostgreSQL the windows are bound as three arrays to
    statements built once; elsewhere they are a VALUES list, rendered anew each time."""
    over = EntriesOver({}, {})
    if not windows:
        return over
    if session.get_bind().dialect.name == "postgresql":
        (sums_of, edges_of), params = _OVER_ARRAYS, _as_arrays(windows)
    else:
        listed = values(*_WINDOW, name="windows").data(list(windows)).cte("windows")
        (sums_of, edges_of), params = _over(listed), {}
    for pod_id, kind, total in session.execute(sums_of, params):
        over.sums[(pod_id, kind)] = total
    for entry in session.scalars(edges_of, params):
        over.edges.setdefault(entry.pod_id, []).append(entry)
    return over


def _over(w: Any) -> tuple[Select[str, EntryKind, Decimal], Select[LedgerEntryRow]]:
    """Over the windows `w` (pod_id, start, end): the sums of the entries wholly inside each,
    by pod and kind, and the entries at their edges."""
    entries = LedgerEntryRow
    overlap = and_(
        entries.pod_id == w.c.pod_id, entries.period_end > w.c.start, entries.period_start < w.c.end
    )
    inside = and_(entries.period_start >= w.c.start, entries.period_end <= w.c.end)
    sums = (
        select(entries.pod_id, entries.kind, func.sum(entries.amount_usd))
        .join(w, and_(overlap, inside))
        .group_by(entries.pod_id, entries.kind)
    )
    return sums, select(entries).join(w, and_(overlap, ~inside))


def _as_arrays(windows: Sequence[tuple[str, datetime, datetime]]) -> dict[str, list[Any]]:
    pod_ids, starts, ends = zip(*windows, strict=True)
    return {"window_pods": list(pod_ids), "window_starts": list(starts), "window_ends": list(ends)}


_WINDOW = (column("pod_id", String), column("start", UTCDateTime()), column("end", UTCDateTime()))
_OVER_ARRAYS = _over(
    func.unnest(
        bindparam("window_pods", type_=ARRAY(String())),
        bindparam("window_starts", type_=ARRAY(UTCDateTime())),
        bindparam("window_ends", type_=ARRAY(UTCDateTime())),
    )
    .table_valued("pod_id", "start", "end", name="windows")
    .render_derived()
)


def runs(
    session: Session,
    request: PageRequest,
    *,
    budget_id: str | None = None,
    name: str | None = None,
    status: RunStatus | None = None,
    scope: TeamScope = EVERY_TEAM,
) -> Page[RunRow]:
    """A page of runs (of the scope's teams), oldest first, narrowed by budget, name and
    status where given."""
    query = select(RunRow).where(budgets_in(scope, RunRow.budget_id))
    if budget_id is not None:
        query = query.where(RunRow.budget_id == budget_id)
    if name is not None:
        query = query.where(RunRow.name == name)
    if status is not None:
        query = query.where(RunRow.status == status)
    return RUNS.page(session, query, request)


def runs_of_budgets(session: Session, budget_ids: Sequence[str]) -> Sequence[RunRow]:
    """The runs of several budgets."""
    query = select(RunRow).where(RunRow.budget_id.in_(budget_ids))
    return session.scalars(query.order_by(RunRow.created_at, RunRow.id)).all()


def active_stop_orders(
    session: Session, budget_ids: Sequence[str] | None = None, *, lock: bool = False
) -> Sequence[StopOrderRow]:
    """Stop orders under way, oldest first; with `lock`, each held for update until commit."""
    query = select(StopOrderRow).where(StopOrderRow.state.in_(ACTIVE_STATES))
    if budget_ids is not None:
        query = query.where(StopOrderRow.budget_id.in_(budget_ids))
    if lock:
        query = query.with_for_update()
    return session.scalars(query.order_by(StopOrderRow.created_at, StopOrderRow.id)).all()


def latest_stop_order(session: Session, pod_id: str, *, lock: bool = False) -> StopOrderRow | None:
    """The pod's newest stop order; with `lock`, held for update (that order alone)."""
    query = (
        select(StopOrderRow)
        .where(StopOrderRow.pod_id == pod_id)
        .order_by(StopOrderRow.created_at.desc(), StopOrderRow.id.desc())
        .limit(1)
    )
    if lock:
        query = query.with_for_update()
    return session.scalars(query).first()


def get_stop_order(session: Session, order_id: str) -> StopOrderRow:
    row: StopOrderRow = _get(session, StopOrderRow, order_id, "stop order")
    return row


def approved_extensions_by_budget(
    session: Session, budget_ids: Sequence[str]
) -> dict[str, Decimal]:
    """What approved extensions add to each budget's ceiling (budgets without any left out)."""
    rows = session.execute(
        select(ExtensionRow.budget_id, func.sum(ExtensionRow.amount_usd))
        .where(
            ExtensionRow.budget_id.in_(budget_ids),
            ExtensionRow.state == ExtensionState.APPROVED,
        )
        .group_by(ExtensionRow.budget_id)
    ).all()
    return {budget_id: total or ZERO for budget_id, total in rows}


def _extensions(budget_id: str | None, state: ExtensionState | None) -> Select[Any]:
    query = select(ExtensionRow)
    if budget_id is not None:
        query = query.where(ExtensionRow.budget_id == budget_id)
    if state is not None:
        query = query.where(ExtensionRow.state == state)
    return query


def extensions(
    session: Session, *, budget_id: str | None = None, state: ExtensionState | None = None
) -> Sequence[ExtensionRow]:
    """Every extension request so narrowed, oldest first."""
    return session.scalars(EXTENSIONS.ordered(_extensions(budget_id, state))).all()


def extensions_page(
    session: Session,
    request: PageRequest,
    *,
    budget_id: str | None = None,
    state: ExtensionState | None = None,
    scope: TeamScope = EVERY_TEAM,
) -> Page[ExtensionRow]:
    """A page of extension requests (of the scope's teams), oldest first."""
    query = _extensions(budget_id, state).where(budgets_in(scope, ExtensionRow.budget_id))
    return EXTENSIONS.page(session, query, request)


def pending_extension_of_run(session: Session, budget_id: str, run_id: str) -> ExtensionRow | None:
    return session.scalars(
        select(ExtensionRow)
        .where(
            ExtensionRow.budget_id == budget_id,
            ExtensionRow.run_id == run_id,
            ExtensionRow.state == ExtensionState.PENDING,
        )
        .order_by(ExtensionRow.created_at)
        .limit(1)
    ).first()


def expire_pending_extensions(session: Session, budget_id: str, now: datetime) -> int:
    """Every pending request of a budget expires (it closed); returns how many did."""
    result = session.execute(
        update(ExtensionRow)
        .where(ExtensionRow.budget_id == budget_id, ExtensionRow.state == ExtensionState.PENDING)
        .values(state=ExtensionState.EXPIRED, decided_at=now, decision_note="budget closed")
        .execution_options(synchronize_session=False)
    )
    # Session.execute is typed to return a Result; an UPDATE's is a CursorResult, with rowcount.
    return int(result.rowcount)  # type: ignore[attr-defined]


def decide_extension(
    session: Session,
    extension_id: str,
    state: ExtensionState,
    now: datetime,
    note: str | None,
) -> bool:
    """Move a pending extension to `state`. False if it was no longer pending (lost the race)."""
    result = session.execute(
        update(ExtensionRow)
        .where(ExtensionRow.id == extension_id, ExtensionRow.state == ExtensionState.PENDING)
        .values(state=state, decided_at=now, decision_note=note)
        .execution_options(synchronize_session=False)
    )
    # Session.execute is typed to return a Result; an UPDATE's is a CursorResult, with rowcount.
    return int(result.rowcount) == 1  # type: ignore[attr-defined]


def token_by_hash(session: Session, token_hash: str) -> TokenRow | None:
    return session.scalars(select(TokenRow).where(TokenRow.token_hash == token_hash)).one_or_none()


def revoked_hashes(session: Session, since: datetime) -> Sequence[str]:
    """The hashes of the tokens revoked at `since` or later."""
    return session.scalars(select(TokenRow.token_hash).where(TokenRow.revoked_at >= since)).all()


def tokens(session: Session, request: PageRequest, scope: TeamScope = EVERY_TEAM) -> Page[TokenRow]:
    """A page of the tokens on file (those the scope may see: `tokens_in`), newest first."""
    return TOKENS.page(session, select(TokenRow).where(tokens_in(scope)), request)


def get_token(session: Session, token_id: str) -> TokenRow:
    row = session.get(TokenRow, token_id)
    if row is None:
        raise NotFound(f"no token {token_id!r}")
    return row


def bootstrap_tokens(session: Session) -> Sequence[TokenRow]:
    return session.scalars(
        select(TokenRow).where(TokenRow.bootstrap.is_(True), TokenRow.revoked_at.is_(None))
    ).all()


def tokens_of(
    session: Session, role: Role, *, run_id: str | None = None, pod_id: str | None = None
) -> Sequence[TokenRow]:
    """The tokens of a role given to one run, or to one pod."""
    owner = TokenRow.run_id == run_id if run_id is not None else TokenRow.pod_id == pod_id
    return session.scalars(select(TokenRow).where(TokenRow.role == role, owner)).all()


def has_operator_token(session: Session) -> bool:
    count = session.scalar(select(func.count()).where(TokenRow.role == Role.OPERATOR))
    return bool(count)


def events(
    session: Session,
    *,
    budget_id: str | None = None,
    severity: Severity | None = None,
    min_severity: Severity | None = None,
    category: Category | None = None,
    subject: str | None = None,
    since: datetime | None = None,
    limit: int = 100,
) -> Sequence[EventRow]:
    """The latest events, newest first: `severity` is that one alone, `min_severity` it or
    worse."""
    filters = _events(budget_id, severity, min_severity, category, subject, since)
    return session.scalars(EVENTS.ordered(filters).limit(limit)).all()


def events_page(
    session: Session,
    request: PageRequest,
    *,
    budget_id: str | None = None,
    severity: Severity | None = None,
    min_severity: Severity | None = None,
    category: Category | None = None,
    subject: str | None = None,
    since: datetime | None = None,
    scope: TeamScope = EVERY_TEAM,
) -> Page[EventRow]:
    """A page of the event log, newest first, narrowed as `events` narrows it."""
    filters = _events(budget_id, severity, min_severity, category, subject, since)
    filters = filters.where(budgets_in(scope, EventRow.budget_id))
    return EVENTS.page(session, filters, request)


def event_tally(
    session: Session,
    *,
    budget_id: str | None = None,
    min_severity: Severity | None = None,
    category: Category | None = None,
) -> tuple[int, int]:
    """How many events so narrowed were recorded as rows (a day's fold counts the rows it
    stands for), and how many occurrences they hold (those folded into them included)."""
    query = _events(budget_id, None, min_severity, category, None, None)
    rows, occurrences = session.execute(
        query.with_only_columns(
            func.coalesce(func.sum(func.coalesce(EventRow.folded_rows, 1)), 0),
            func.coalesce(func.sum(EventRow.count), 0),
        )
    ).one()
    return int(rows), int(occurrences)


def _events(
    budget_id: str | None,
    severity: Severity | None,
    min_severity: Severity | None,
    category: Category | None,
    subject: str | None,
    since: datetime | None,
) -> Select[Any]:
    query = select(EventRow)
    if budget_id is not None:
        query = query.where(EventRow.budget_id == budget_id)
    if severity is not None:
        query = query.where(EventRow.severity == severity)
    if min_severity is not None:
        query = query.where(
            EventRow.severity.in_([s for s in Severity if at_least(s, min_severity)])
        )
    if category is not None:
        query = query.where(EventRow.category == category)
    if subject is not None:
        query = query.where(EventRow.subject == subject)
    if since is not None:
        query = query.where(EventRow.last_at >= since)  # a folded event: its latest counts
    return query


def foldable_event(
    session: Session, severity: Severity, subject: str, message: str, since: datetime
) -> EventRow | None:
    """The latest event with this subject, message and severity last recorded since `since`."""
    return session.scalars(
        select(EventRow)
        .where(
            EventRow.subject == subject,
            EventRow.last_at >= since,
            EventRow.severity == severity,
            EventRow.message == message,
        )
        .order_by(EventRow.id.desc())
        .limit(1)
    ).first()


def runs_on_pod(session: Session, pod_id: str) -> Sequence[RunRow]:
    return session.scalars(
        select(RunRow).where(RunRow.pod_id == pod_id).order_by(RunRow.created_at)
    ).all()


def peaks_of(session: Session, run_ids: Sequence[str]) -> Sequence[GpuPeakRow]:
    """The GPU peaks of these runs: one statement whatever their number (the enforcement pass
    reads the live runs' peaks every pass)."""
    if not run_ids:
        return []
    query = select(GpuPeakRow).where(one_of(GpuPeakRow.run_id, "run_ids"))
    return session.scalars(query.order_by(GpuPeakRow.gpu_uuid), {"run_ids": list(run_ids)}).all()


def floors_of_runs(session: Session, run_ids: Sequence[str]) -> Sequence[MeasuredFloorRow]:
    if not run_ids:
        return []
    return session.scalars(
        select(MeasuredFloorRow)
        .where(MeasuredFloorRow.run_id.in_(run_ids))
        .order_by(MeasuredFloorRow.run_id, MeasuredFloorRow.gpu_uuid, MeasuredFloorRow.phase)
    ).all()


def floors_of_model(
    session: Session, model_id: str, revision: str | None
) -> Sequence[tuple[MeasuredFloorRow, bool]]:
    """Every measured floor of a model and revision, with whether its run ran out of memory."""
    same_revision = (
        MeasuredFloorRow.model_revision.is_(None)
        if revision is None
        else MeasuredFloorRow.model_revision == revision
    )
    rows = session.execute(
        select(MeasuredFloorRow, RunRow.out_of_memory)
        .join(RunRow, RunRow.id == MeasuredFloorRow.run_id)
        .where(MeasuredFloorRow.model_id == model_id, same_revision)
        .order_by(MeasuredFloorRow.run_id, MeasuredFloorRow.gpu_uuid, MeasuredFloorRow.phase)
    ).all()
    return [(floor, oom) for floor, oom in rows]


def local_pods(session: Session) -> Sequence[PodRow]:
    """Pods whose GPUs this server samples itself, while they may still be running."""
    return session.scalars(
        select(PodRow).where(PodRow.local.is_(True), PodRow.state.in_(BILLS_COMPUTE))
    ).all()


def pods_on_node(session: Session, node: str) -> Sequence[PodRow]:
    """The pods registered on a machine, while they may still be running."""
    return session.scalars(
        select(PodRow)
        .where(PodRow.node == node, PodRow.state.in_(BILLS_COMPUTE))
        .order_by(PodRow.created_at)
    ).all()


def entered_phase(
    session: Session, run_ids: Sequence[str], phase: Phase, from_step: int
) -> set[str]:
    """Those of these runs whose job entered `phase` at step `from_step` or later."""
    query = select(RunPhaseRow.run_id).where(
        RunPhaseRow.run_id.in_(run_ids), RunPhaseRow.phase == phase, RunPhaseRow.step >= from_step
    )
    return set(session.scalars(query.distinct()).all())


def runs_of_plan(session: Session, budget_id: str, job_id: str) -> Sequence[RunRow]:
    """The runs on the pods registered under any check of a plan."""
    checks = select(PlanCheckRow.id).where(
        PlanCheckRow.budget_id == budget_id, PlanCheckRow.job_id == job_id
    )
    pods = select(PodRow.id).where(PodRow.plan_id.in_(checks))
    return session.scalars(select(RunRow).where(RunRow.pod_id.in_(pods))).all()


def plan_checks_of_budgets(session: Session, budget_ids: Sequence[str]) -> Sequence[PlanCheckRow]:
    """The verdicts of several budgets, oldest first."""
    query = select(PlanCheckRow).where(PlanCheckRow.budget_id.in_(budget_ids))
    return session.scalars(PLAN_CHECKS.ordered(query)).all()


def get_plan_check(session: Session, plan_id: str) -> PlanCheckRow:
    row = session.get(PlanCheckRow, plan_id)
    if row is None:
        raise NotFound(f"no plan {plan_id!r}")
    return row


def plan_checks_of(session: Session, budget_id: str) -> Sequence[PlanCheckRow]:
    """A budget's preflight verdicts, oldest first."""
    return plan_checks_of_budgets(session, [budget_id])


def plan_checks_page(session: Session, budget_id: str, request: PageRequest) -> Page[PlanCheckRow]:
    """A page of a budget's preflight verdicts, oldest first."""
    query = select(PlanCheckRow).where(PlanCheckRow.budget_id == budget_id)
    return PLAN_CHECKS.page(session, query, request)


# --- launches ----------------------------------------------------------------------------


def get_launch(session: Session, launch_id: str, *, lock: bool = False) -> LaunchRow:
    query = select(LaunchRow).where(LaunchRow.id == launch_id)
    if lock:
        query = query.with_for_update()
    row = session.scalars(query).one_or_none()
    if row is None:
        raise NotFound(f"no launch {launch_id!r}")
    return row


def launch_by_key(session: Session, request_key: str, now: datetime) -> LaunchRow | None:
    """The launch of this request whose reservation is still held, if any."""
    return session.scalars(
        select(LaunchRow).where(
            LaunchRow.request_key == request_key,
            LaunchRow.released_at.is_(None),
            LaunchRow.expires_at > now,
        )
    ).first()


def latest_launch_by_key(session: Session, request_key: str) -> LaunchRow | None:
    """The latest launch of this request, its reservation held or released."""
    return session.scalars(
        select(LaunchRow)
        .where(LaunchRow.request_key == request_key)
        .order_by(LaunchRow.created_at.desc(), LaunchRow.id.desc())
    ).first()


def launch_by_claim(session: Session, claim_hash: str) -> LaunchRow | None:
    return session.scalars(
        select(LaunchRow).where(LaunchRow.claim_hash == claim_hash).with_for_update()
    ).one_or_none()


def reserved_for_launches(
    session: Session, budget_ids: Sequence[str], now: datetime
) -> dict[str, Decimal]:
    """What the launches not yet released, nor expired, hold back, by budget (one read)."""
    held = {budget_id: ZERO for budget_id in budget_ids}
    if not budget_ids:
        return held
    rows = session.execute(
        select(LaunchRow.budget_id, LaunchRow.reserved_usd).where(
            LaunchRow.released_at.is_(None),
            LaunchRow.expires_at > now,
            one_of(LaunchRow.budget_id, "budget_ids"),
        ),
        {"budget_ids": list(budget_ids)},
    )
    for budget_id, reserved in rows:
        held[budget_id] += reserved
    return held


def launches_expired(session: Session, now: datetime) -> Sequence[LaunchRow]:
    """The launches whose reservation is still held past its expiry, locked for release."""
    return session.scalars(
        select(LaunchRow)
        .where(LaunchRow.released_at.is_(None), LaunchRow.expires_at <= now)
        .with_for_update(skip_locked=True)
    ).all()


def launches_waiting(session: Session, launch_ids: Collection[str]) -> dict[str, str]:
    """Of these launches, those no pod is registered with yet: each one's budget, by its id."""
    if not launch_ids:
        return {}
    tied = select(PodRow.id).where(PodRow.launch_id == LaunchRow.id).exists()
    rows = session.execute(
        select(LaunchRow.id, LaunchRow.budget_id).where(one_of(LaunchRow.id, "launch_ids"), ~tied),
        {"launch_ids": sorted(launch_ids)},
    )
    return {launch_id: budget_id for launch_id, budget_id in rows}


def budgets_adopting_labelled_pods(session: Session) -> frozenset[str]:
    """The budgets whose label alone registers a pod under them."""
    return frozenset(
        session.scalars(select(BudgetRow.id).where(BudgetRow.adopt_labelled_pods.is_(True)))
    )


def pod_of_launch(session: Session, launch_id: str) -> PodRow | None:
    """The first pod registered with this launch."""
    return session.scalars(
        select(PodRow).where(PodRow.launch_id == launch_id).order_by(PodRow.created_at)
    ).first()


def provider_gpu_rate(session: Session, provider: str, gpu_type: str) -> PodRow | None:
    """The latest pod of `provider` with GPUs of `gpu_type` whose rate its provider reported."""
    return session.scalars(
        select(PodRow)
        .where(
            PodRow.provider == provider,
            func.lower(PodRow.gpu_type) == gpu_type.lower(),
            PodRow.rate_source == RateSource.PROVIDER,
            PodRow.gpu_count > 0,
        )
        .order_by(PodRow.created_at.desc())
        .limit(1)
    ).first()
