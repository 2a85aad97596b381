"""A plan kept true while it runs: what its pods really cost, against what it was admitted on.

Each enforcement pass compares every pod that bills under a plan with its plan's latest
verdict. A pod whose rate departs from the plan's quote (the quoted rate per GPU of its GPU
model, times its GPUs) by more than the plan's contingency, and a plan whose pods' spend passes
its worst case, raise an event with both figures (a warning, or information where the pod
bills less than quoted), once per departure (a rate is told
again only when it changes, or after it came back within the contingency); the plan's
reservation is checked again with it: what the plan still needs at the rate billed (its
compute scaled to that rate, its storage and other costs as quoted, with its contingency),
less what its pods have spent, against the money the budget has for it (what is left, less
what its other admitted plans hold back).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import PlanCheckRow
from governor.domain.model import Category, Severity
from governor.domain.money import ZERO, dollars, dollars_per_hour, format_usd, usd
from governor.services import events
from governor.services.money.book import LiveBook, LivePod, by_budget
from governor.services.plans.admission import reservations_in


@dataclass(frozen=True)
class Quote:
    """What a plan's verdict was given to expect of its pods' cost."""

    rates: dict[str, tuple[Decimal, int]]  # by GPU model: the rate per GPU-hour, the GPUs
    contingency: Decimal
    compute: Decimal
    storage: Decimal
    other: Decimal

    @classmethod
    def of(cls, plan: PlanCheckRow) -> Quote:
        cost: dict[str, Any] = plan.figures["cost"]
        rates = {
            g["gpu_type"].casefold(): (Decimal(g["rate_usd_per_gpu_hour"]), int(g["gpus"]))
            for g in cost["groups"]
        }
        return cls(
            rates=rates,
            contingency=Decimal(str(cost["contingency"])),
            compute=Decimal(cost["compute_usd"]),
            storage=Decimal(cost["storage_usd"]),
            other=Decimal(cost["other_usd"]),
        )

    def for_pod(self, pod: LivePod) -> Decimal | None:
        """The pod's quoted hourly rate: its GPU model's rate times its GPUs; None when the
        plan quotes no rate for the GPUs the pod has."""
        if pod.gpu_type is not None and pod.gpu_type.casefold() in self.rates:
            rate, gpus = self.rates[pod.gpu_type.casefold()]
        elif len(self.rates) == 1:  # one GPU model in the plan: the pod is of it
            [(rate, gpus)] = self.rates.values()
        else:
            return None
        return rate * (pod.gpu_count or gpus)

    def worst_at(self, ratio: Decimal) -> Decimal:
        """The plan's worst case with its compute at `ratio` times the quoted rate."""
        return usd((self.compute * ratio + self.storage + self.other) * (1 + self.contingency))


def check(session: Session, books: Sequence[LiveBook], now: datetime) -> None:
    """Compare each plan's pods with what their plan quoted; warn of a departure once."""
    if not any(p.plan_id is not None for b in books for p in b.pods):
        return
    checks = by_budget(repo.plan_checks_of_budgets(session, [b.budget.id for b in books]))
    for book in books:
        of_budget = checks[book.budget.id]
        job_of = {c.id: c.job_id for c in of_budget}
        latest = {c.job_id: c for c in of_budget}  # oldest first: the last one wins
        pods_of: dict[str, list[LivePod]] = defaultdict(list)
        for pod in book.pods:
            if pod.plan_id is not None:
                pods_of[job_of[pod.plan_id]].append(pod)
        for job, pods in pods_of.items():
            plan = latest[job]
            quote = Quote.of(plan)
            for pod in pods:
                if pod.state.bills_compute:
                    _rate(session, book, of_budget, plan, quote, pod)
            _worst_case(session, book, of_budget, plan, quote, pods, now)


def _rate(
    session: Session,
    book: LiveBook,
    checks: Sequence[PlanCheckRow],
    plan: PlanCheckRow,
    quote: Quote,
    pod: LivePod,
) -> None:
    quoted = quote.for_pod(pod)
    if quoted is None or quoted <= ZERO:
        return
    billed = pod.hourly_rate_usd
    departure = (billed - quoted) / quoted
    if abs(departure) <= quote.contingency:
        if pod.plan_rate_warned_usd is not None:
            pod.plan_rate_warned_usd = None  # back in line: a new departure is told anew
        return
    if pod.plan_rate_warned_usd == billed:
        return  # this departure was told
    pod.plan_rate_warned_usd = billed
    spent = _spent(book, plan, checks)
    worst = quote.worst_at(billed / quoted)
    needs = max(ZERO, worst - spent)
    has = _has(book, checks, plan)
    covered = (
        "the budget still covers it"
        if needs <= has
        else f"the budget no longer covers it: {dollars(needs - has)} short"
    )
    events.record(
        session,
        book.now,
        Severity.WARNING if departure > 0 else Severity.INFO,  # cheaper costs the budget nothing
        Category.BUDGET,
        f"pod:{pod.id}",
        f"Pod {pod.id} bills {dollars_per_hour(billed)}, {departure:+.0%} from the "
        f"{dollars_per_hour(quoted)} its plan {plan.job_id!r} quoted (contingency "
        f"±{quote.contingency:.0%}). Its reservation checked again: at this rate the plan's worst "
        f"case is {dollars(worst)} (quoted {dollars(plan.worst_case_usd)}); with "
        f"{dollars(spent)} spent it still needs {dollars(needs)} of the {dollars(has)} the "
        f"budget has for it: {covered}.",
        budget_id=book.budget.id,
        evidence={
            "plan": plan.id,
            "job_id": plan.job_id,
            "billed_usd_per_hour": format_usd(billed),
            "quoted_usd_per_hour": format_usd(quoted),
            "departure": round(float(departure), 4),
            "contingency": float(quote.contingency),
            "worst_case_usd": format_usd(plan.worst_case_usd),
            "worst_case_at_billed_rate_usd": format_usd(worst),
            "spent_usd": format_usd(spent),
            "still_needed_usd": format_usd(needs),
            "available_usd": format_usd(has),
        },
    )


def _worst_case(
    session: Session,
    book: LiveBook,
    checks: Sequence[PlanCheckRow],
    plan: PlanCheckRow,
    quote: Quote,
    pods: Sequence[LivePod],
    now: datetime,
) -> None:
    if plan.worst_case_passed_at is not None:
        return  # told for this verdict
    spent = _spent(book, plan, checks)
    if spent <= plan.worst_case_usd:
        return
    plan.worst_case_passed_at = now
    rates = [(p.hourly_rate_usd, quote.for_pod(p)) for p in pods if p.state.bills_compute]
    billing = "; ".join(
        f"billing {dollars_per_hour(b)} against {dollars_per_hour(q)} quoted"
        for b, q in rates
        if q is not None
    )
    has = _has(book, checks, plan)
    events.record(
        session,
        now,
        Severity.WARNING,
        Category.BUDGET,
        f"plan:{plan.id}",
        f"Plan {plan.job_id!r} has spent {dollars(spent)}, past its worst case of "
        f"{dollars(plan.worst_case_usd)} by {dollars(spent - plan.worst_case_usd)}"
        + (f" ({billing})" if billing else "")
        + f". Its reservation checked again: it holds nothing more; what it spends from now "
        f"comes out of the {dollars(has)} the budget has left for it, and the ceiling still "
        "stops it.",
        budget_id=book.budget.id,
        evidence={
            "job_id": plan.job_id,
            "spent_usd": format_usd(spent),
            "worst_case_usd": format_usd(plan.worst_case_usd),
            "over_usd": format_usd(spent - plan.worst_case_usd),
            "available_usd": format_usd(has),
        },
    )


def _spent(book: LiveBook, plan: PlanCheckRow, checks: Sequence[PlanCheckRow]) -> Decimal:
    ids = {c.id for c in checks if c.job_id == plan.job_id}
    return sum((book.spent_on(p) for p in book.pods if p.plan_id in ids), ZERO)


def _has(book: LiveBook, checks: Sequence[PlanCheckRow], plan: PlanCheckRow) -> Decimal:
    """The money the budget has for the plan: what is left, less what its other admitted
    plans hold back."""
    others = reservations_in(checks, book, except_job=plan.job_id)
    return max(ZERO, book.figures.remaining - sum((r.held for r in others), ZERO))
