"""Declaring budgets, reading them back with their figures, and closing them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import BudgetRow, PodRow
from governor.domain.budget_lifecycle import may_close
from governor.domain.errors import Conflict
from governor.domain.model import BudgetState, Category, PodState, Severity
from governor.domain.money import dollars, format_usd
from governor.domain.paging import Page, PageRequest
from governor.domain.teams import DEFAULT_TEAM_ID, EVERY_TEAM, TeamScope
from governor.services import events
from governor.services.context import GovernorConfig
from governor.services.fleet import teams
from governor.services.ids import new_id
from governor.services.money import team_money
from governor.services.money.book import Book, open_book, open_books
from governor.services.money.metering import accrue_pod
from governor.services.runs import lifecycle
from governor.services.security import tokens
from governor.services.security.tokens import Principal

DEFAULT_THRESHOLDS = (50, 80, 90)
ADOPT_LABELLED_PODS_DOC = (
    "whether the account sweep registers a pod under this budget by its governor-budget label "
    "alone; without it a labelled pod registers only as one of the budget's launches waiting "
    "for a pod (its governor-launch label), and any other stays ungoverned"
)


@dataclass(frozen=True)
class Declaration:
    name: str
    ceiling_usd: Decimal
    reserve_usd: Decimal = Decimal(0)
    storage_tail_hours: float = 0.0
    alert_thresholds: tuple[int, ...] = DEFAULT_THRESHOLDS
    note: str | None = None
    require_plan: bool = False  # pods only under an admitted plan
    team: str | None = None  # the team's id or name; None: the default team
    adopt_labelled_pods: bool = False  # a pod's budget label alone registers it


def _default_team(scope: TeamScope) -> str:
    """The team a budget declared without one goes to: the default team, or for a caller
    scoped to exactly one team, that team."""
    if scope.team_ids is not None and len(scope.team_ids) == 1:
        return next(iter(scope.team_ids))
    return DEFAULT_TEAM_ID


def declare(
    session: Session, declaration: Declaration, now: datetime, *, scope: TeamScope = EVERY_TEAM
) -> BudgetRow:
    """Write the ceiling down before any pod is registered. It never changes afterwards.
    Its name is one people type (`governor pod add NAME`): no other budget that is not
    closed may have it. It belongs to the team `declaration.team` names among those `scope`
    sees (none named: the default team, or the one team a team's operator is for)."""
    team = teams.find(session, declaration.team or _default_team(scope), scope)
    _refuse_a_taken_name(session, declaration.name)
    team_money.refuse_beyond_left(
        session, team.id, "a budget's ceiling", declaration.ceiling_usd, now
    )
    budget = BudgetRow(
        id=new_id("bud"),
        team_id=team.id,
        name=declaration.name,
        ceiling_usd=declaration.ceiling_usd,
        reserve_usd=declaration.reserve_usd,
        storage_tail_hours=declaration.storage_tail_hours,
        alert_thresholds=sorted(set(declaration.alert_thresholds)),
        note=declaration.note,
        require_plan=declaration.require_plan,
        adopt_labelled_pods=declaration.adopt_labelled_pods,
        state=BudgetState.OPEN,
        alerted_pct=0,
        created_at=now,
    )
    try:
        with session.begin_nested():  # a declaration of the same name may have just committed
            session.add(budget)
    except IntegrityError:
        _refuse_a_taken_name(session, declaration.name)
        raise
    events.record(
        session,
        now,
        Severity.INFO,
        Category.OPERATOR,
        f"budget:{budget.id}",
        f"Budget {budget.name!r} declared with a hard ceiling of {dollars(budget.ceiling_usd)}.",
        budget_id=budget.id,
        evidence={
            "ceiling_usd": format_usd(budget.ceiling_usd),
            "reserve_usd": format_usd(budget.reserve_usd),
            "storage_tail_hours": budget.storage_tail_hours,
            "alert_thresholds": budget.alert_thresholds,
            "note": budget.note,
            "require_plan": budget.require_plan,
            "adopt_labelled_pods": budget.adopt_labelled_pods,
            "team_id": budget.team_id,
        },
    )
    return budget


def _refuse_a_taken_name(session: Session, name: str) -> None:
    taken = repo.open_budget_named(session, name)
    if taken is not None:
        raise Conflict(
            f"budget {taken.id} is already named {name!r} ({taken.state.value}): choose another "
            "name, or close that budget first"
        )


def adopt_labelled_pods(
    session: Session, budget_id: str, adopt: bool, reason: str, now: datetime, *, by: Principal
) -> BudgetRow:
    """An operator of the budget's team lets its label alone register pods found billing in
    an account under it (`adopt`), or stops letting it; recorded with who and why."""
    budget = repo.get_budget(session, budget_id, lock=True)
    if budget.adopt_labelled_pods is adopt:
        return budget
    budget.adopt_labelled_pods = adopt
    events.record(
        session,
        now,
        Severity.WARNING if adopt else Severity.INFO,
        Category.OPERATOR,
        f"budget:{budget.id}",
        (
            f"Budget {budget.name!r} now adopts labelled pods ({by.said}): a pod carrying its "
            "governor-budget label is registered under it by that label alone"
            if adopt
            else f"Budget {budget.name!r} no longer adopts labelled pods ({by.said}): a "
            "labelled pod registers only as one of its launches waiting for a pod"
        )
        + f": {reason}",
        budget_id=budget.id,
        evidence={"adopt_labelled_pods": adopt, "reason": reason, "by": by.evidence},
    )
    return budget


def close(
    session: Session,
    budget_id: str,
    reason: str,
    storage_deleted: bool,
    now: datetime,
    *,
    by: Principal,
) -> BudgetRow:
    """An operator closes the budget: its runs end and pending extension requests expire.
    Its stopped pods keep counting storage until the operator says their storage was deleted
    (`storage_deleted`, now or in a later close): then they are released, `gone`, and their
    agent tokens end. The governor itself never deletes anything."""
    budget = repo.get_budget(session, budget_id, lock=True)
    pods = repo.pods_of(session, budget.id)
    billing = [p.id for p in pods if p.state.bills_compute]
    if billing:
        raise Conflict(
            f"budget {budget.id} still has pods billing compute ({', '.join(billing)}): "
            "stop them first (POST /v1/pods/{id}/stop), then close it"
        )
    if budget.state is not BudgetState.CLOSED:
        if not may_close(budget.state):
            raise Conflict(f"budget {budget.id} is {budget.state.value}: wait for its stops")
        budget.state, budget.closed_at = BudgetState.CLOSED, now
        for pod in pods:
            lifecycle.end_with_pod(session, pod, now)
        expired = repo.expire_pending_extensions(session, budget.id, now)
        events.record(
            session,
            now,
            Severity.INFO,
            Category.OPERATOR,
            f"budget:{budget.id}",
            f"Budget closed by {by.said}: {reason}",
            budget_id=budget.id,
            evidence={"reason": reason, "expired_extensions": expired, "by": by.evidence},
        )
    if storage_deleted:
        for pod in pods:
            if pod.state is PodState.STOPPED:
                _release(session, pod, now, by)
    return budget


def _release(session: Session, pod: PodRow, now: datetime, by: Principal) -> None:
    """The operator deleted the pod's storage: it stops counting, and its agent's token ends."""
    accrue_pod(session, pod, now)
    pod.state, pod.released_at = PodState.GONE, now
    tokens.revoke_of_pod(session, pod.id, now)
    events.record(
        session,
        now,
        Severity.INFO,
        Category.OPERATOR,
        f"pod:{pod.id}",
        f"Pod released: {by.said} confirmed its storage ({pod.storage_gb:g} GB) was deleted; "
        "it is no longer counted.",
        budget_id=pod.budget_id,
        evidence={"storage_gb": pod.storage_gb, "by": by.evidence},
    )


def book(session: Session, config: GovernorConfig, budget_id: str, now: datetime) -> Book:
    return open_book(session, budget_id, now, config)


def books(
    session: Session,
    config: GovernorConfig,
    now: datetime,
    request: PageRequest,
    *,
    name: str | None = None,
    scope: TeamScope = EVERY_TEAM,
) -> Page[Book]:
    """A page of the budgets' books (of the scope's teams), oldest first; with `name`, of the
    budgets so named."""
    page = repo.budgets_page(session, request, name=name, scope=scope)
    return Page(open_books(session, [b.id for b in page.items], now, config), page.next_cursor)
