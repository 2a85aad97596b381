"""A plan's check as it is read: its verdict with every reason, the figures it was judged on,
its binding and its canary; an admitted plan with what it holds back; and the checks, reads
and decisions that answer with them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy.orm import Session

from governor.db.tables import PlanCheckRow
from governor.domain.paging import Page, PageRequest
from governor.domain.preflight.plan import Plan
from governor.domain.preflight.rules import Finding, Verdict
from governor.services.context import GovernorConfig
from governor.services.money.book import open_book
from governor.services.plans import admission
from governor.services.plans.plan_figures_model import PlanCost, PlanMemory, cost, memory
from governor.services.security.tokens import Principal


@dataclass(frozen=True)
class PlanCheck:
    id: str
    budget_id: str
    job_id: str
    verdict: Verdict
    effective_ceiling: Decimal | None = field(
        metadata={"doc": "the ceiling it was judged against: another one needs a new check"}
    )
    override_reason: str | None = field(metadata={"doc": "an operator let this no_go through"})
    withdrawn_at: datetime | None
    canary_released_at: datetime | None = field(
        metadata={"doc": "canary_only: when training was released, on the measured peak"}
    )
    canary_peak_gib: float | None
    canary_released_by: str | None
    reasons: tuple[Finding, ...]
    memory: PlanMemory
    cost: PlanCost
    plan: dict[str, Any]
    created_at: datetime


HELD_DOC = (
    "its worst case less that spend: held back when another plan is admitted (never part of "
    "committed spend)"
)
FORMERLY_RESERVED_DOC = "held_usd's former name, kept for existing clients: the same amount"


@dataclass(frozen=True)
class AdmittedPlan:
    """An admitted plan and what it holds back from the budget's money for admission."""

    plan: PlanCheck = field(metadata={"doc": "its latest check"})
    spent: Decimal = field(metadata={"doc": "what its pods have cost so far"})
    held: Decimal = field(metadata={"doc": HELD_DOC})
    reserved: Decimal = field(metadata={"doc": FORMERLY_RESERVED_DOC})
    released: bool = field(metadata={"doc": "its runs have all ended: it holds nothing back"})


def plan_check(row: PlanCheckRow) -> PlanCheck:
    return PlanCheck(
        id=row.id,
        budget_id=row.budget_id,
        job_id=row.job_id,
        verdict=row.verdict,
        effective_ceiling=row.effective_ceiling_usd,
        override_reason=row.override_reason,
        withdrawn_at=row.withdrawn_at,
        canary_released_at=row.canary_released_at,
        canary_peak_gib=row.canary_peak_gib,
        canary_released_by=row.canary_released_by,
        reasons=tuple(finding(r) for r in row.reasons),
        memory=memory(row.figures["memory"]),
        cost=cost(row.figures["cost"]),
        plan=row.plan,
        created_at=row.created_at,
    )


def finding(stored: dict[str, Any]) -> Finding:
    """A finding as a check stored it."""
    return Finding(
        rule=stored["rule"],
        verdict=Verdict(stored["verdict"]),
        message=stored["message"],
        evidence=stored.get("evidence", {}),
        gpu_type=stored.get("gpu_type"),
        usable_gib=stored.get("usable_gib"),
    )


def check(
    session: Session,
    config: GovernorConfig,
    budget_id: str,
    plan: Plan,
    document: dict[str, Any],
    now: datetime,
    *,
    pod_id: str | None = None,
) -> PlanCheck:
    """Judge a plan and keep the verdict (admission.check)."""
    return plan_check(
        admission.check(session, config, budget_id, plan, document, now, pod_id=pod_id)
    )


def history(session: Session, budget_id: str, request: PageRequest) -> Page[PlanCheck]:
    """A page of the verdicts given on the budget's plans, oldest first."""
    rows = admission.history(session, budget_id, request)
    return Page([plan_check(r) for r in rows.items], rows.next_cursor)


def admitted(
    session: Session, config: GovernorConfig, budget_id: str, now: datetime, request: PageRequest
) -> Page[AdmittedPlan]:
    """A page of the budget's admitted plans, by their latest check, oldest first: what each
    has spent and still holds back."""
    book = open_book(session, budget_id, now, config)
    held = admission.reservations_page(session, book, request)
    return Page(
        [AdmittedPlan(plan_check(r.plan), r.spent, r.held, r.held, r.released) for r in held.items],
        held.next_cursor,
    )


def override(
    session: Session, budget_id: str, plan_id: str, reason: str, now: datetime, *, by: Principal
) -> PlanCheck:
    """Let a no_go plan through, with a reason (admission.override)."""
    return plan_check(admission.override(session, budget_id, plan_id, reason, now, by=by))


def release(
    session: Session,
    budget_id: str,
    plan_id: str,
    peak_gib: float,
    reason: str,
    now: datetime,
    *,
    by: Principal,
) -> PlanCheck:
    """Release a canary_only plan's training on its canary's measured peak
    (admission.release_by_operator)."""
    return plan_check(
        admission.release_by_operator(session, budget_id, plan_id, peak_gib, reason, now, by=by)
    )


def withdraw(
    session: Session, budget_id: str, plan_id: str, now: datetime, *, by: Principal
) -> PlanCheck:
    """Take a plan back (admission.withdraw)."""
    return plan_check(admission.withdraw(session, budget_id, plan_id, now, by=by))
