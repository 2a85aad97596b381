"""Preflight admission: judge a plan against the budget's real money left, and keep the verdict.

The money a plan may cost starts from the budget's `remaining` figure, effective ceiling
minus committed spend, so what is already spent, what stopping the running pods will
cost, their storage tail and the budget's own reserve are all out of it. The admission
rules then keep back a further preflight reserve (10% of remaining, at least $20).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import PlanCheckRow
from governor.domain.errors import Invalid
from governor.domain.model import Category, Severity
from governor.domain.money import MAX_USD, dollars, format_usd
from governor.domain.preflight.plan import Plan
from governor.domain.preflight.rules import Admission, Verdict, admit
from governor.services import events
from governor.services.book import open_book
from governor.services.context import GovernorConfig, ReadPlan
from governor.services.ids import new_id


def check(
    session: Session,
    config: GovernorConfig,
    budget_id: str,
    plan: Plan,
    document: dict[str, Any],
    now: datetime,
) -> PlanCheckRow:
    """Judge `plan` (stored as `document`) and record the verdict with the budget."""
    remaining = open_book(session, budget_id, now, config).figures.remaining
    admission = admit(plan, now.date(), remaining)
    a, result = admission.assessment, admission.as_json()
    if a.cost.worst > MAX_USD:
        raise Invalid(
            f"the plan's worst case {dollars(a.cost.worst)} is over {dollars(MAX_USD)}: "
            "check its rates, hours and GPU count"
        )
    available = a.available
    assert available is not None  # a budget always has a remaining figure
    row = PlanCheckRow(
        id=new_id("pln"),
        budget_id=budget_id,
        job_id=plan.job_id,
        verdict=admission.verdict,
        gpu_type=plan.hardware.gpu_type,
        modeled_gib=round(a.memory.modeled_gib, 3),
        usable_gib=round(a.memory.usable_gib, 3),
        worst_case_usd=a.cost.worst,
        available_usd=available,
        plan=document,
        reasons=result["reasons"],
        figures={"memory": result["memory"], "cost": result["cost"]},
        created_at=now,
    )
    session.add(row)
    session.flush()
    events.record(
        session,
        now,
        Severity.INFO if admission.verdict is Verdict.GO else Severity.WARNING,
        Category.BUDGET,
        f"plan:{row.id}",
        _summary(plan, admission, available),
        budget_id=budget_id,
        evidence={
            "verdict": admission.verdict.value,
            "job_id": plan.job_id,
            "modeled_gib": row.modeled_gib,
            "usable_gib": row.usable_gib,
            "worst_case_usd": format_usd(row.worst_case_usd),
            "available_usd": format_usd(available),
        },
    )
    return row


def recheck(
    session: Session,
    config: GovernorConfig,
    budget_id: str,
    now: datetime,
    read_plan: ReadPlan | None,
) -> PlanCheckRow | None:
    """Judge the budget's latest plan again, against the money left now (before a resume),
    recording the verdict with the caller's transaction. None when the budget has no plan."""
    checks = repo.plan_checks_of(session, budget_id)
    if not checks:
        return None
    assert read_plan is not None, "a governor that keeps plans reads them back"
    document = checks[-1].plan
    return check(session, config, budget_id, read_plan(document), document, now)


def history(session: Session, budget_id: str) -> Sequence[PlanCheckRow]:
    """Every verdict given on the budget's plans, oldest first."""
    repo.get_budget(session, budget_id)
    return repo.plan_checks_of(session, budget_id)


def _summary(plan: Plan, admission: Admission, available: Decimal) -> str:
    a = admission.assessment
    head = f"Plan {plan.job_id!r} preflight: {admission.verdict.value}"
    deciding = admission.deciding
    if deciding is not None:
        return f"{head}. {deciding.message}"
    return (
        f"{head}: modeled peak {a.memory.modeled_gib:.1f} of {a.memory.usable_gib:.1f} GiB "
        f"per GPU, worst case {dollars(a.cost.worst)} of {dollars(available)} available."
    )
