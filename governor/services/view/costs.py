"""The ledger's spend as cost lines: by pod, UTC hour, charge (compute or storage) and kind of
entry, over a stretch of time, read a day at a time so an export of a year holds no more than
one day's lines at once. What the lines become in FOCUS columns is `render/focus.py`'s.

Only the budgets of the teams a caller may see are read. A line sums ledger entries exactly
(micro-dollars), so the lines of a stretch add up to what the ledger holds for it to the
micro-dollar. Accruals are summed per pod, hour and charge; a true-up or an operator's
adjustment is a line of its own, in the hour its entry starts, with its note.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from sqlalchemy import ColumnElement, select

from governor.db import repository as repo
from governor.db.engine import read_only
from governor.db.tables import BudgetRow, LedgerEntryRow, PodRow, TeamRow
from governor.domain.errors import Invalid, NotFound
from governor.domain.ledger import SLICE, slice_start
from governor.domain.model import ChargeKind, EntryKind
from governor.domain.money import SECONDS_PER_HOUR
from governor.domain.teams import TeamScope
from governor.services.context import ServiceContext
from governor.services.fleet import teams

MAX_SPAN = timedelta(days=366)  # one export: at most a year (and a day)
_DAY = timedelta(days=1)


@dataclass(frozen=True)
class CostQuery:
    """What an export covers: the ledger entries that start in [start, end), whole UTC hours,
    of one budget or every budget."""

    start: datetime
    end: datetime
    budget_id: str | None = None
    team: str | None = None  # a team's id or name

    @classmethod
    def of(
        cls,
        start: datetime | None,
        end: datetime | None,
        now: datetime,
        *,
        budget_id: str | None = None,
        team: str | None = None,
    ) -> CostQuery:
        """A query whose `start` defaults to the start of `now`'s UTC month, and whose `end`
        defaults to the end of `now`'s UTC hour: the month so far, the current hour whole."""
        hour = slice_start(now.astimezone(UTC))
        return cls(
            hour.replace(day=1, hour=0) if start is None else start,
            hour + SLICE if end is None else end,
            budget_id,
            team,
        )

    def __post_init__(self) -> None:
        for name, instant in (("from", self.start), ("to", self.end)):
            if instant.tzinfo is None or instant.utcoffset() != timedelta(0):
                raise Invalid(f"`{name}` must be an instant in UTC, e.g. 2026-01-01T00:00:00Z")
            if instant != slice_start(instant):
                raise Invalid(
                    f"`{name}` must be a whole UTC hour (the ledger's entries are cut at "
                    f"every hour): {instant.isoformat()} is not"
                )
        if self.end <= self.start:
            raise Invalid("`to` must be later than `from`")
        if self.end - self.start > MAX_SPAN:
            raise Invalid(
                f"an export covers at most {MAX_SPAN.days} days; "
                "ask for a longer stretch in several exports"
            )


@dataclass(frozen=True)
class CostLine:
    """Spend of one pod in one UTC hour, of one charge and kind of entry."""

    hour: datetime  # the UTC hour its entries start in
    team_id: str
    team_name: str
    budget_id: str
    budget_name: str
    pod_id: str
    pod_name: str
    provider: str
    provider_ref: str
    region: str | None
    gpu_type: str | None
    gpu_count: int | None
    storage_gb: float
    charge: ChargeKind
    kind: EntryKind
    amount: Decimal  # micro-dollars, summed exactly
    seconds: Decimal  # what its entries cover, summed (accruals: the time metered)
    note: str | None  # a true-up's or an adjustment's note

    @property
    def hours(self) -> Decimal:
        return self.seconds / SECONDS_PER_HOUR

    @property
    def period_end(self) -> datetime:
        return self.hour + SLICE


_COLUMNS = (
    LedgerEntryRow.id,
    LedgerEntryRow.period_start,
    LedgerEntryRow.period_end,
    LedgerEntryRow.kind,
    LedgerEntryRow.charge,
    LedgerEntryRow.amount_usd,
    LedgerEntryRow.note,
    TeamRow.id.label("team_id"),
    TeamRow.name.label("team_name"),
    BudgetRow.id.label("budget_id"),
    BudgetRow.name.label("budget_name"),
    PodRow.id.label("pod_id"),
    PodRow.name.label("pod_name"),
    PodRow.provider,
    PodRow.provider_ref,
    PodRow.region,
    PodRow.gpu_type,
    PodRow.gpu_count,
    PodRow.storage_gb,
)

# the columns of a line that say whose spend it is: the budget's and the pod's
_OWNER = tuple(c.name for c in _COLUMNS[7:])


def lines(ctx: ServiceContext, query: CostQuery, scope: TeamScope) -> Iterator[CostLine]:
    """The cost lines of `query` that `scope` sees (the budgets of the teams its caller may
    see), hour by hour (each hour's by budget, pod, charge and kind), read a day at a time,
    each day in a read-only transaction of its own. A budget or team it names must exist and
    be seen (404 otherwise): checked here, before the first line is asked for."""
    team_id = None
    with read_only(ctx.sessions) as session:
        if query.budget_id is not None:
            budget = repo.get_budget(session, query.budget_id)
            if not scope.sees(budget.team_id):
                raise NotFound(f"no budget {query.budget_id!r}")
        if query.team is not None:
            team_id = teams.find(session, query.team, scope).id
    return _lines(ctx, query, scope, team_id)


def _lines(
    ctx: ServiceContext, query: CostQuery, scope: TeamScope, team_id: str | None
) -> Iterator[CostLine]:
    narrowed: list[ColumnElement[bool]] = []
    if query.budget_id is not None:
        narrowed.append(LedgerEntryRow.budget_id == query.budget_id)
    if team_id is not None:
        narrowed.append(BudgetRow.team_id == team_id)
    if scope.team_ids is not None:
        narrowed.append(BudgetRow.team_id.in_(scope.team_ids))
    day = query.start
    while day < query.end:
        until = min(day + _DAY, query.end)
        yield from _day_lines(ctx, narrowed, day, until)
        day = until


def _day_lines(
    ctx: ServiceContext, narrowed: list[ColumnElement[bool]], start: datetime, end: datetime
) -> list[CostLine]:
    statement = (
        select(*_COLUMNS)
        .join_from(LedgerEntryRow, PodRow, LedgerEntryRow.pod_id == PodRow.id)
        .join(BudgetRow, LedgerEntryRow.budget_id == BudgetRow.id)
        .join(TeamRow, BudgetRow.team_id == TeamRow.id)
        .where(LedgerEntryRow.period_start >= start, LedgerEntryRow.period_start < end, *narrowed)
        .order_by(LedgerEntryRow.period_start, LedgerEntryRow.id)
    )
    summed: dict[tuple[object, ...], CostLine] = {}
    with read_only(ctx.sessions) as session:
        for row in session.execute(statement):
            entry_id, p_start, p_end, kind, charge, amount, note = row[:7]
            hour = slice_start(p_start)
            seconds = Decimal(str((p_end - p_start).total_seconds()))
            # accruals sum per pod, hour and charge; any other entry is a line of its own
            own = None if kind is EntryKind.ACCRUAL else entry_id
            key = (hour, row.pod_id, charge, kind, own)
            kept = summed.get(key)
            if kept is None:
                owner = {name: row._mapping[name] for name in _OWNER}
                summed[key] = CostLine(
                    hour,
                    **owner,
                    charge=charge,
                    kind=kind,
                    amount=amount,
                    seconds=seconds,
                    note=note,
                )
            else:
                summed[key] = _added(kept, amount, seconds)
    return sorted(
        summed.values(),
        key=lambda c: (c.hour, c.budget_id, c.pod_id, c.charge.value, c.kind.value),
    )


def _added(line: CostLine, amount: Decimal, seconds: Decimal) -> CostLine:
    return replace(line, amount=line.amount + amount, seconds=line.seconds + seconds)
