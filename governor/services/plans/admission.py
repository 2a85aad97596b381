"""Preflight admission: judge a plan against the budget's real money left, keep the verdict,
and hold pods and runs to it.

The money a plan may cost starts from the budget's `remaining` figure, effective ceiling
minus committed spend, so what is already spent, what stopping the running pods will
cost, their storage tail and the budget's own reserve are all out of it. What the budget's
other admitted plans may still cost (their worst case less what their pods have spent), and
what the launches a gate accepted reserve until their pods register, are reserved against it
too, so two arms are not both judged against the same money; a
reservation never enters committed spend. The admission rules then keep back a further
preflight reserve (10% of what is left, at least $20).

A pod registered under a plan is bound by the plan's latest verdict: a `no_go` refuses it
(and runs on it) unless an operator overrode that verdict with a reason; a verdict judged
against another effective ceiling must be judged again; a withdrawn plan binds nothing more
and reserves nothing. A budget that requires a plan refuses pods without one.
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
from governor.db.tables import BudgetRow, PlanCheckRow, PodRow
from governor.domain.errors import Conflict, Invalid
from governor.domain.model import Action, Category, Phase, Reason, Severity
from governor.domain.money import MAX_USD, ZERO, dollars, format_usd
from governor.domain.paging import Page, PageRequest
from governor.domain.policy import CanaryHold
from governor.domain.preflight.measured import floor_key
from governor.domain.preflight.placement import FreeGpu, need_of, placement
from governor.domain.preflight.plan import CANARY, Plan
from governor.domain.preflight.rules import (
    MEASURED_SHARE,
    MIN_CANARY_STEPS,
    Admission,
    Verdict,
    admit,
)
from governor.domain.telemetry import GIB, owns
from governor.services import events
from governor.services.context import GovernorConfig
from governor.services.ids import new_id
from governor.services.money.book import (
    Book,
    BookOf,
    LiveBook,
    LivePod,
    LiveRun,
    by_budget,
    open_book,
)
from governor.services.monitoring import telemetry
from governor.services.plans import floors
from governor.services.plans.document import read_plan
from governor.services.security.tokens import Principal


def check(
    session: Session,
    config: GovernorConfig,
    budget_id: str,
    plan: Plan,
    document: dict[str, Any],
    now: datetime,
    *,
    pod_id: str | None = None,
) -> PlanCheckRow:
    """Judge `plan` (stored as `document`) and record the verdict with the budget; with
    `pod_id`, also on the free memory that pod's GPUs report (placement), each GPU against
    the per-GPU peak of the plan's GPU model it is."""
    book = open_book(session, budget_id, now, config)
    reserved = sum((r.held for r in reservations(session, book, plan.job_id)), ZERO)
    reserved += repo.reserved_for_launches(session, [budget_id], now)[budget_id]
    kept = floors.of_model(session, plan)
    admission = admit(plan, now.date(), book.figures.remaining, reserved=reserved, floors=kept)
    if pod_id is not None:
        pod = repo.get_of_budget(session, PodRow, pod_id, "pod", budget_id)
        gpus = [  # its own GPUs alone: a neighbour's on a shared machine is shown, not judged
            FreeGpu(g.uuid, g.index, g.name, g.memory_free_bytes, at)
            for at, g in telemetry.latest(session, pod.id)
            if owns(pod.gpu_uuids, g.uuid)
        ]
        needs = [  # a pod is one machine: each group's GPUs per node
            need_of(g) for g in admission.assessment.groups
        ]
        admission = admission.with_finding(placement(needs, gpus))
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
        gpu_type=a.tightest.group.gpu_type,  # the group that decides the memory verdict
        modeled_gib=round(a.memory.modeled_gib, 3),
        usable_gib=round(a.memory.usable_gib, 3),
        worst_case_usd=a.cost.worst,
        available_usd=available,
        plan=document,
        reasons=result["reasons"],
        figures={"memory": result["memory"], "cost": result["cost"]},
        created_at=now,
        effective_ceiling_usd=book.figures.effective_ceiling,
        reserved_usd=reserved,
        floor_key=None if (key := floor_key(plan)) is None else key.as_json(),
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
) -> PlanCheckRow | None:
    """Judge the budget's latest plan again, against the money left now (before a resume),
    recording the verdict with the caller's transaction. None when the budget has no plan."""
    checks = repo.plan_checks_of(session, budget_id)
    if not checks:
        return None
    document = checks[-1].plan
    return check(session, config, budget_id, read_plan(document), document, now)


HELD_FOR_PLANS_DOC = (
    "what the budget's admitted plans may still cost (each its worst case less what its pods "
    "spent), held back when another plan is admitted: never part of committed spend, never a "
    "cause of a stop"
)


@dataclass(frozen=True)
class Reservation:
    """What one admitted plan may still cost the budget: its worst case less its pods' spend."""

    plan: PlanCheckRow  # its latest check
    spent: Decimal
    held: Decimal
    released: bool  # its runs have all ended: it holds nothing back


def reservations(session: Session, book: Book, except_job: str | None = None) -> list[Reservation]:
    """Each admitted plan of the budget (its latest check: not withdrawn, not a no_go unless
    overridden) with what it holds back, `except_job` left out (the plan being judged)."""
    return reservations_in(repo.plan_checks_of(session, book.budget.id), book, except_job)


def held_for_plans(session: Session, books: Sequence[Book]) -> dict[str, Decimal]:
    """What these budgets' admitted plans hold back from admission, by budget: one read for
    all. Never part of committed spend."""
    checks = by_budget(repo.plan_checks_of_budgets(session, [b.budget.id for b in books]))
    return {
        b.budget.id: sum((r.held for r in reservations_in(checks[b.budget.id], b)), ZERO)
        for b in books
    }


def reservations_in(
    checks: Sequence[PlanCheckRow], book: BookOf[Any, Any, Any, Any], except_job: str | None = None
) -> list[Reservation]:
    """What each admitted plan among `checks` (a budget's, oldest first) holds back in `book`,
    a budget's book or a pass's: its latest check, its pods' spend, what it still holds."""
    job_of = {c.id: c.job_id for c in checks}
    latest = {c.job_id: c for c in checks}  # oldest first: the last one wins
    pods_of: dict[str, list[PodRow | LivePod]] = defaultdict(list)
    for pod in book.pods:
        if pod.plan_id is not None:
            pods_of[job_of[pod.plan_id]].append(pod)
    held = []
    for job, plan in latest.items():
        if job == except_job or not _admitted(plan):
            continue
        pods = pods_of[job]
        spent = sum((book.spent_on(p) for p in pods), ZERO)
        runs = [r for p in pods for r in book.runs_on(p.id)]
        released = bool(runs) and not any(r.status.is_live for r in runs)
        left = ZERO if released else max(ZERO, plan.worst_case_usd - spent)
        held.append(Reservation(plan, spent, left, released))
    return held


def reservations_page(session: Session, book: Book, request: PageRequest) -> Page[Reservation]:
    """A page of the budget's admitted plans, in the order of their latest checks."""
    held = sorted(reservations(session, book), key=_latest_check)
    return repo.PLAN_CHECKS.page_of(held, _latest_check, request)


def _latest_check(held: Reservation) -> tuple[Any, ...]:
    return repo.PLAN_CHECKS.key_of(held.plan)


def _admitted(plan: PlanCheckRow) -> bool:
    return plan.withdrawn_at is None and (
        plan.verdict is not Verdict.NO_GO or plan.override_reason is not None
    )


def latest(session: Session, budget_id: str, plan_id: str) -> PlanCheckRow:
    """The latest check of the plan `plan_id` names (a re-check gives a plan a new verdict)."""
    named = repo.get_of_budget(session, PlanCheckRow, plan_id, "plan", budget_id)
    return [c for c in repo.plan_checks_of(session, budget_id) if c.job_id == named.job_id][-1]


def bind(
    session: Session, budget: BudgetRow, plan_id: str | None, effective_ceiling: Decimal
) -> PlanCheckRow | None:
    """The plan a new pod (or a run on it) is admitted under; Conflict, with the reasons, when
    it may not be: no plan where the budget requires one, a no_go not overridden, a verdict
    judged against another ceiling, a withdrawn plan."""
    if plan_id is None:
        if budget.require_plan:
            raise Conflict(
                f"budget {budget.id} requires a plan: check one (POST /v1/budgets/{budget.id}"
                "/plans) and register the pod with its plan_id"
            )
        return None
    plan = latest(session, budget.id, plan_id)
    name = f"plan {plan.job_id!r} ({plan.id})"
    if plan.withdrawn_at is not None:
        raise Conflict(f"{name} was withdrawn: check it again to use it")
    judged = plan.effective_ceiling_usd  # None: judged against no ceiling in particular
    if judged is not None and judged != effective_ceiling:
        raise Conflict(
            f"{name} was judged against a ceiling of {dollars(judged)}; the "
            f"budget's is now {dollars(effective_ceiling)}: check the plan again"
        )
    if plan.verdict is Verdict.NO_GO and plan.override_reason is None:
        deciding = [r["message"] for r in plan.reasons if r.get("verdict") == Verdict.NO_GO]
        raise Conflict(
            f"{name} is no_go: {' '.join(deciding) or 'see its reasons'} Change the plan and "
            f"check it again, or an operator may override: POST /v1/budgets/{budget.id}/plans"
            f"/{plan.id}/override with a reason"
        )
    return plan


def override(
    session: Session, budget_id: str, plan_id: str, reason: str, now: datetime, *, by: Principal
) -> PlanCheckRow:
    """An operator lets a no_go plan through, for this plan in this budget, until it is
    checked again; recorded as an event and in the report."""
    repo.get_budget(session, budget_id, lock=True)
    plan = latest(session, budget_id, plan_id)
    if plan.verdict is not Verdict.NO_GO:
        raise Conflict(f"plan {plan.job_id!r} is {plan.verdict.value}: nothing to override")
    plan.override_reason, plan.override_at = reason, now
    events.record(
        session,
        now,
        Severity.WARNING,
        Category.OPERATOR,
        f"plan:{plan.id}",
        f"The no_go verdict of plan {plan.job_id!r} overridden by {by.said}: {reason}",
        budget_id=budget_id,
        evidence={
            "reason": reason,
            "reasons": [r["message"] for r in plan.reasons],
            "by": by.evidence,
        },
    )
    return plan


@dataclass(frozen=True)
class Canary:
    """What holds a canary_only plan's runs: the canary's spend cap, the measured peak per GPU
    that releases training, and what the canary must show first: its optimizer steps (in phase
    `canary`), then, where the verdict asks for them, one `evaluation` batch and an
    acknowledged checkpoint, both at or after those steps."""

    cap: Decimal
    threshold_gib: float
    min_steps: int
    evaluation: bool
    checkpoint: bool

    @classmethod
    def of(cls, plan: PlanCheckRow) -> Canary | None:
        """The hold of a canary_only plan not yet released; None otherwise."""
        if plan.verdict is not Verdict.CANARY_ONLY or plan.canary_released_at is not None:
            return None
        phases = plan.plan.get("phases", [])
        canary: dict[str, Any] = next((p for p in phases if p.get("name") == CANARY), {})
        asked = _release_asked(plan)
        return cls(
            cap=Decimal(plan.figures["cost"]["canary_worst_case_usd"]),
            threshold_gib=MEASURED_SHARE * plan.usable_gib,
            min_steps=max(
                int(canary.get("min_optimizer_steps") or MIN_CANARY_STEPS),
                int(asked.get("min_optimizer_steps", MIN_CANARY_STEPS)),
            ),
            evaluation=bool(asked.get("evaluation", True)),
            checkpoint=bool(asked.get("checkpoint", True)),
        )

    @property
    def needs(self) -> str:
        """What the canary must show besides its peak, in words."""
        shown = [f"{self.min_steps} optimizer steps in phase 'canary'"]
        if self.evaluation:
            shown.append("one 'evaluation' batch")
        if self.checkpoint:
            shown.append("one acknowledged checkpoint")
        after = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"
        return f" after {after}"

    def told(self, plan: PlanCheckRow) -> str:
        """What the job hears while it is held."""
        return (
            f"Held to the canary of plan {plan.job_id!r} (canary_only): report phase 'canary'; "
            f"it may spend {dollars(self.cap)}; training is released once the measured peak "
            f"stays under {self.threshold_gib:.1f} GiB per GPU{self.needs}."
        )

    def shown_by(self, run: LiveRun, evaluated: set[str]) -> bool:
        """The run has shown what the canary must: its steps, its eval batch and checkpoint
        after them where asked (`evaluated`: the runs that entered `evaluation` after them)."""
        if run.step < self.min_steps:
            return False
        if self.evaluation and run.id not in evaluated:
            return False
        saved = run.checkpoint_step
        return not self.checkpoint or (saved is not None and saved >= self.min_steps)


def _release_asked(plan: PlanCheckRow) -> dict[str, Any]:
    """What the verdict asks of the canary (its memory findings' `canary_release`); a verdict
    given before it said so asked the steps, an eval batch and a checkpoint."""
    asked: dict[str, Any] = {}
    for reason in plan.reasons:
        release = reason.get("evidence", {}).get("canary_release")
        if reason.get("rule") == "memory_fit" and release:
            asked = {  # several GPU groups: the most any of them asks
                "min_optimizer_steps": max(
                    int(asked.get("min_optimizer_steps", 0)),
                    int(release.get("min_optimizer_steps", 0)),
                ),
                "evaluation": bool(asked.get("evaluation")) or bool(release.get("evaluation")),
                "checkpoint": bool(asked.get("checkpoint")) or bool(release.get("checkpoint")),
            }
    return asked


def release_canary(
    session: Session,
    plan: PlanCheckRow,
    peak_gib: float,
    by: str,
    now: datetime,
    *,
    operator: Principal | None = None,
) -> None:
    """Training is released for the plan's runs: its canary's peak fit. Their directive no
    longer carries the hold. `operator`: the token that entered the peak, if one did."""
    plan.canary_released_at, plan.canary_peak_gib, plan.canary_released_by = now, peak_gib, by
    for run in repo.runs_of_plan(session, plan.budget_id, plan.job_id):
        if run.directive_reason is Reason.CANARY_HOLD and run.directive is Action.CONTINUE:
            run.directive_reason = run.directive_message = None
    events.record(
        session,
        now,
        Severity.INFO,
        Category.BUDGET,
        f"plan:{plan.id}",
        f"Plan {plan.job_id!r}: training released ({by}): the canary's peak, "
        f"{peak_gib:.1f} GiB per GPU, is under the {MEASURED_SHARE * plan.usable_gib:.1f} GiB "
        "threshold.",
        budget_id=plan.budget_id,
        evidence={
            "peak_gib": round(peak_gib, 2),
            "released_by": by,
            **({} if operator is None else {"by": operator.evidence}),
        },
    )


def holds(session: Session, books: Sequence[LiveBook], now: datetime) -> dict[str, CanaryHold]:
    """The canary holds over these budgets' pods, by pod, each with the highest peak its runs
    measured (over the threshold, the canary is stopped on it); a canary whose run has shown
    what the verdict asks with a measured peak under the threshold is released here instead
    (by telemetry)."""
    if not any(p.plan_id is not None for b in books for p in b.pods):
        return {}  # no pod started from a plan: no canary to hold
    checks = repo.plan_checks_of_budgets(session, [b.budget.id for b in books])
    if not checks:
        return {}
    job_of = {c.id: (c.budget_id, c.job_id) for c in checks}
    latest_of = {(c.budget_id, c.job_id): c for c in checks}  # oldest first: the last wins
    held: dict[str, CanaryHold] = {}
    for book in books:
        by_plan: dict[PlanCheckRow, list[LivePod]] = defaultdict(list)
        for pod in book.pods:
            if pod.plan_id is not None:
                by_plan[latest_of[job_of[pod.plan_id]]].append(pod)
        for plan, pods in by_plan.items():
            canary = Canary.of(plan)
            if canary is None:
                continue
            runs = [r for p in pods for r in book.runs_on(p.id)]
            peaks = _peaks(session, runs)
            highest = max(peaks.values(), default=None)
            proven = _proven_peak(session, runs, peaks, canary)
            if proven is not None:
                release_canary(session, plan, proven, "by telemetry", now)
                continue
            spent = sum((book.spent_on(p) for p in pods), ZERO)
            hold = CanaryHold(
                plan.job_id, canary.cap, spent, canary.threshold_gib, canary.needs, highest
            )
            held.update((p.id, hold) for p in pods)
    return held


def _peaks(session: Session, runs: Sequence[LiveRun]) -> dict[str, float]:
    """The measured peak per GPU (GiB) of each of these runs that has one."""
    peaks: dict[str, float] = defaultdict(float)
    for peak in repo.peaks_of(session, [r.id for r in runs]) if runs else ():
        peaks[peak.run_id] = max(peaks[peak.run_id], peak.peak_used_bytes / GIB)
    return peaks


def _proven_peak(
    session: Session, runs: Sequence[LiveRun], peaks: dict[str, float], canary: Canary
) -> float | None:
    """The measured peak per GPU (GiB) of a run that has shown what the canary must, if no
    run's peak is over the threshold."""
    if any(p > canary.threshold_gib for p in peaks.values()):
        return None  # over: the canary is stopped on it, never released
    stepped = [r for r in runs if r.step >= canary.min_steps and r.id in peaks]
    evaluated: set[str] = set()
    if canary.evaluation and stepped:
        evaluated = repo.entered_phase(
            session, [r.id for r in stepped], Phase.EVALUATION, canary.min_steps
        )
    shown = [peaks[r.id] for r in stepped if canary.shown_by(r, evaluated)]
    return max(shown) if shown else None


def release_by_operator(
    session: Session,
    budget_id: str,
    plan_id: str,
    peak_gib: float,
    reason: str,
    now: datetime,
    *,
    by: Principal,
) -> PlanCheckRow:
    """An operator enters the canary's measured peak (a pod without telemetry is released only
    this way); refused with the figures when it does not fit."""
    repo.get_budget(session, budget_id, lock=True)
    plan = latest(session, budget_id, plan_id)
    canary = Canary.of(plan)
    if canary is None:
        raise Conflict(f"plan {plan.job_id!r} is {plan.verdict.value}, with no canary held")
    if peak_gib > canary.threshold_gib:
        raise Conflict(
            f"a measured peak of {peak_gib:.1f} GiB per GPU is over the release threshold "
            f"{canary.threshold_gib:.1f} GiB ({MEASURED_SHARE:.0%} of {plan.usable_gib:.1f} GiB "
            "usable): training stays held; change the plan and check it again"
        )
    release_canary(session, plan, peak_gib, f"{by.said}: {reason}", now, operator=by)
    return plan


def withdraw(
    session: Session, budget_id: str, plan_id: str, now: datetime, *, by: Principal
) -> PlanCheckRow:
    """The plan is taken back: it reserves nothing more and admits no new pod."""
    repo.get_budget(session, budget_id, lock=True)
    plan = latest(session, budget_id, plan_id)
    if plan.withdrawn_at is None:
        plan.withdrawn_at = now
        events.record(
            session,
            now,
            Severity.INFO,
            Category.OPERATOR,
            f"plan:{plan.id}",
            f"Plan {plan.job_id!r} withdrawn by {by.said}: its reservation of "
            f"{dollars(plan.worst_case_usd)} at most is released.",
            budget_id=budget_id,
            evidence={"by": by.evidence},
        )
    return plan


def history(session: Session, budget_id: str, request: PageRequest) -> Page[PlanCheckRow]:
    """A page of the verdicts given on the budget's plans, oldest first."""
    repo.get_budget(session, budget_id)
    return repo.plan_checks_page(session, budget_id, request)


def _summary(plan: Plan, admission: Admission, available: Decimal) -> str:
    a = admission.assessment
    head = f"Plan {plan.job_id!r} preflight: {admission.verdict.value}"
    deciding = admission.deciding
    if deciding is not None:
        return f"{head}. {deciding.message}"
    g = a.tightest
    tightest = "" if len(a.groups) == 1 else f" on the {g.gpus} x {g.group.gpu_type}, the tightest"
    return (
        f"{head}: modeled peak {a.memory.modeled_gib:.1f} of {a.memory.usable_gib:.1f} GiB "
        f"per GPU{tightest}, worst case {dollars(a.cost.worst)} of {dollars(available)} available."
    )
