"""Launches a gate judges: found their budget, priced, checked against its money and plan, and
once accepted reserved like an admitted plan until their pod registers, they are withdrawn, or
their reservation expires; each with its run's one-time claim secret.

A reservation is held back from what the next plan or launch may be admitted for and shown
beside committed spend; it never enters committed spend and never causes a stop.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db import team_scope
from governor.db import teams as team_queries
from governor.db.tables import BudgetRow, LaunchRow, PlanCheckRow, PodRow
from governor.domain.errors import Conflict, NotFound
from governor.domain.launch_gate import Candidate, Decision, LaunchRequest, Money, decide, price
from governor.domain.model import BudgetState, Category, Severity
from governor.domain.money import dollars, format_usd
from governor.domain.rate_card import Rate
from governor.domain.teams import EVERY_TEAM, TeamScope
from governor.services import events
from governor.services.context import GovernorConfig
from governor.services.ids import new_id
from governor.services.money import team_money
from governor.services.money.book import open_book
from governor.services.plans import admission
from governor.services.plans.document import read_plan
from governor.services.security.tokens import Principal, digest

CLAIM_PREFIX = "gov_claim_"
CLAIM_KEY = "launch-claims"  # the shared secret each launch's claim is made from
# why a reservation ended
POD_APPEARED = "pod-appeared"
WITHDRAWN = "withdrawn"
EXPIRED = "expired"

RESERVED_FOR_LAUNCHES_DOC = (
    "what the launches the gates accepted may cost until their pods register (each its priced "
    "maximum), held back when a plan or another launch is admitted: never part of committed "
    "spend, never a cause of a stop"
)


@dataclass(frozen=True)
class GateAnswer:
    decision: Decision
    budget_id: str | None
    launch: LaunchRow | None = None  # the reservation acceptance made (or found again)
    claim: str | None = None  # the launch's one-time claim secret, in plain text, made now


def reserved_for_launches(
    session: Session, budget_ids: Sequence[str], now: datetime
) -> dict[str, Decimal]:
    """What these budgets' accepted launches hold back, by budget (one read)."""
    return repo.reserved_for_launches(session, budget_ids, now)


def judge(
    session: Session,
    config: GovernorConfig,
    request: LaunchRequest,
    now: datetime,
    *,
    reserve: bool,
    claim_key: bytes,
    request_key: str | None = None,
    scope: TeamScope = EVERY_TEAM,
) -> GateAnswer:
    """The gate's answer to a launch; with `reserve`, an accepted one is reserved, with its
    claim secret (made from `claim_key`, the server's, and the launch's id). A repeated
    request (the same `request_key`) finds its launch, and its claim, again while its
    reservation is held, instead of reserving twice. A gate token for some teams finds their
    budgets alone (`scope`); the money is the budget's, and its team's where the team has a
    ceiling and less left."""
    found = (
        None
        if not reserve or request_key is None
        else repo.launch_by_key(session, request_key, now)
    )
    if found is not None:
        return GateAnswer(_again(found), found.budget_id, found, claim_secret(claim_key, found.id))
    budget = _budget(session, config, request, scope)
    if isinstance(budget, Decision):
        return GateAnswer(budget, None)
    if reserve:
        budget = repo.get_budget(session, budget.id, lock=True)  # launches reserve one by one
    if budget.state is not BudgetState.OPEN:
        return GateAnswer(
            Decision(False, (f"budget {budget.name} is {budget.state.value}: no new launches.",)),
            budget.id,
        )
    book = open_book(session, budget.id, now, config)
    team = team_queries.get_team(session, budget.team_id, EVERY_TEAM)
    team_figures = team_money.figures(session, team, now)
    if team_figures is not None and team_figures.reached:
        return GateAnswer(
            Decision(
                False,
                (
                    f"team {team.name!r} reached its ceiling this period "
                    f"({format_usd(team_figures.committed)} committed of "
                    f"{format_usd(team_figures.ceiling)}): no new launches until "
                    f"{team_figures.period.end:%Y-%m-%d %H:%M} UTC, or an extension of its "
                    "ceiling is approved.",
                ),
            ),
            budget.id,
        )
    remaining = book.figures.remaining
    if team_figures is not None and team_figures.remaining < remaining:
        remaining = team_figures.remaining  # the team's ceiling binds first
    plans = admission.reservations(session, book)
    plan = max(plans, key=lambda r: r.plan.created_at, default=None)
    hours, hours_from = _hours(config, request, plan.plan if plan else None)
    priced = price(request, hours, lambda c: _rate(session, config, c))
    money = Money(
        remaining,
        sum((r.held for r in plans), Decimal(0)),
        repo.reserved_for_launches(session, [budget.id], now)[budget.id],
    )
    decision = decide(
        priced,
        money,
        budget=budget.name,
        require_plan=budget.require_plan,
        plan=None if plan is None else f"{plan.plan.job_id!r} ({plan.plan.id})",
        plan_holds=None if plan is None else plan.held,
    )
    decision.figures["hours_from"] = hours_from
    if decision.warnings:
        events.record(
            session,
            now,
            Severity.WARNING,
            Category.BUDGET,
            f"budget:{budget.id}",
            f"A {request.tool} launch{_named(request)} was let through unpriced: "
            + " ".join(decision.warnings),
            budget_id=budget.id,
            evidence={"tool": request.tool, **decision.figures},
        )
    if not decision.accepted or not reserve:
        if not decision.accepted:
            _refused(session, request, budget, decision, now)
        return GateAnswer(decision, budget.id)
    launch = _reserve(session, config, request, budget, decision, plan, now, request_key, claim_key)
    return GateAnswer(decision, budget.id, launch, claim_secret(claim_key, launch.id))


def _budget(
    session: Session, config: GovernorConfig, request: LaunchRequest, scope: TeamScope
) -> BudgetRow | Decision:
    """The launch's budget: its label's, else the default for its user, else its project's."""
    ref, said = request.budget_ref, "its governor-budget label"
    if ref is None and request.user is not None:
        ref, said = config.gate_default_budgets.get(f"user:{request.user}"), f"user {request.user}"
    if ref is None and request.project is not None:
        ref = config.gate_default_budgets.get(f"project:{request.project}")
        said = f"project {request.project}"
    if ref is None:
        return Decision(
            False,
            (
                "no budget for this launch: label it governor-budget=<budget name>, or an "
                "operator sets a default budget for its user or project "
                "(GOVERNOR_GATE_DEFAULT_BUDGETS).",
            ),
        )
    found = repo.open_budget_named(session, ref)
    if found is None:
        try:
            found = repo.get_budget(session, ref)
        except NotFound:
            return Decision(False, (f"no open budget {ref!r} (from {said}).",))
    if not scope.sees(found.team_id):  # another team's, as one that does not exist
        return Decision(False, (f"no open budget {ref!r} (from {said}).",))
    return found


def _hours(
    config: GovernorConfig, request: LaunchRequest, plan: PlanCheckRow | None
) -> tuple[Decimal, str]:
    """The hours the launch is priced for, and where they come from: its plan's maximum, the
    request's declared maximum, the server's default."""
    if plan is not None:
        hours = sum((p.max_hours for p in read_plan(plan.plan).phases), Decimal(0))
        return hours, f"plan {plan.job_id!r}: its phases' maximum hours"
    if request.max_hours is not None:
        return request.max_hours, "the request's maximum duration"
    return config.gate_default_max_hours, "GOVERNOR_GATE_DEFAULT_MAX_HOURS"


def _rate(session: Session, config: GovernorConfig, c: Candidate) -> Rate | None:
    """The rate card's rate; else the rate a registered pod of that provider and GPU reports."""
    assert c.accelerator is not None
    rate = config.rate_card.rate(c.provider, c.accelerator, spot=c.spot, region=c.region)
    if rate is not None or c.provider is None:
        return rate
    pod = repo.provider_gpu_rate(session, c.provider, c.accelerator)
    if pod is None or not pod.gpu_count:
        return None
    return Rate(pod.hourly_rate_usd / pod.gpu_count, f"pod {pod.id}", "provider's rate of")


def _reserve(
    session: Session,
    config: GovernorConfig,
    request: LaunchRequest,
    budget: BudgetRow,
    decision: Decision,
    plan: admission.Reservation | None,
    now: datetime,
    request_key: str | None,
    claim_key: bytes,
) -> LaunchRow:
    launch_id = new_id("lch")
    launch = LaunchRow(
        id=launch_id,
        budget_id=budget.id,
        tool=request.tool,
        request_key=request_key,
        name=request.name,
        user=request.user,
        project=request.project,
        plan_id=None if plan is None else plan.plan.id,
        price_usd=Decimal(str(decision.figures["price_usd"])),
        reserved_usd=decision.reserve,
        figures={"reasons": list(decision.reasons), **decision.figures},
        created_at=now,
        expires_at=now + timedelta(seconds=config.launch_reservation_ttl_s),
        claim_hash=digest(claim_secret(claim_key, launch_id)),
        claim_expires_at=now + timedelta(seconds=config.claim_ttl_s),
    )
    session.add(launch)
    session.flush()
    events.record(
        session,
        now,
        Severity.INFO,
        Category.BUDGET,
        f"launch:{launch.id}",
        f"A {request.tool} launch{_named(request)} accepted; {dollars(decision.reserve)} "
        f"reserved until its pod registers: {' '.join(decision.reasons)}",
        budget_id=budget.id,
        evidence={"tool": request.tool, "user": request.user, **decision.figures},
    )
    return launch


def claim_secret(claim_key: bytes, launch_id: str) -> str:
    """The launch's claim secret: the same each time it is asked for (a tool that asks twice
    gets the same), known to no one without the server's key; only its hash is stored."""
    mac = hmac.new(claim_key, launch_id.encode(), "sha256").digest()
    return CLAIM_PREFIX + base64.urlsafe_b64encode(mac).decode().rstrip("=")


def _again(launch: LaunchRow) -> Decision:
    """A repeated request's answer: its launch, as accepted the first time."""
    return Decision(
        True,
        tuple(launch.figures.get("reasons", ())),
        (),
        launch.reserved_usd,
        {k: v for k, v in launch.figures.items() if k != "reasons"},
    )


def _refused(
    session: Session, request: LaunchRequest, budget: BudgetRow, decision: Decision, now: datetime
) -> None:
    events.record(
        session,
        now,
        Severity.WARNING,
        Category.BUDGET,
        f"budget:{budget.id}",
        f"A {request.tool} launch{_named(request)} refused: {' '.join(decision.reasons)}",
        budget_id=budget.id,
        evidence={"tool": request.tool, "user": request.user, **decision.figures},
    )


def _named(request: LaunchRequest) -> str:
    who = f" by {request.user}" if request.user else ""
    return (f" {request.name!r}" if request.name else "") + who


def accepted(session: Session, launch_id: str, scope: TeamScope = EVERY_TEAM) -> bool:
    """Whether a gate accepted a launch of this id for a budget of the scope's teams (a
    relaunch's label names it): another team's launch is as unknown as one never made."""
    team = team_scope.team_of(session, "launch", launch_id)
    return team is not None and scope.sees(team)


def of_pod(session: Session, launch_id: str, budget_id: str) -> LaunchRow:
    """The launch a pod registering under `budget_id` names, locked until it is tied to it:
    NotFound when there is none of this budget's (another budget's, perhaps another team's, is
    told as one that does not exist), Conflict when a pod registered with it already (a launch
    is won by its first pod: a copy of its label wins nothing)."""
    launch = repo.get_of_budget(session, LaunchRow, launch_id, "launch", budget_id, lock=True)
    tied = repo.pod_of_launch(session, launch.id)
    if tied is not None:
        raise Conflict(
            f"launch {launch.id} already has its pod ({tied.id}): a launch registers one pod; "
            "register this one without it"
        )
    return launch


def tie(session: Session, pod: PodRow, launch: LaunchRow, now: datetime) -> None:
    """`pod` registered as `launch`'s (`of_pod`): tied to it, and its reservation released
    (the meter takes over)."""
    pod.launch_id = launch.id
    if launch.released_at is None:
        _release(session, launch, POD_APPEARED, now, f"its pod {pod.id} registered")


def withdraw(session: Session, launch_id: str, now: datetime, *, by: Principal) -> LaunchRow:
    """An operator takes an accepted launch back: its reservation is released now."""
    launch = repo.get_launch(session, launch_id, lock=True)
    if launch.released_at is not None:
        raise Conflict(
            f"launch {launch.id}'s reservation was already released ({launch.release_reason})"
        )
    _release(session, launch, WITHDRAWN, now, f"withdrawn by {by.said}")
    return launch


def expire(session: Session, now: datetime) -> int:
    """Release every reservation past its expiry with no pod registered: how many."""
    expired = repo.launches_expired(session, now)
    for launch in expired:
        _release(session, launch, EXPIRED, now, "no pod registered with it in time")
    return len(expired)


def _release(session: Session, launch: LaunchRow, reason: str, now: datetime, why: str) -> None:
    launch.released_at, launch.release_reason = now, reason
    events.record(
        session,
        now,
        Severity.INFO,
        Category.BUDGET,
        f"launch:{launch.id}",
        f"Launch {launch.id}'s reservation of {dollars(launch.reserved_usd)} released: {why}.",
        budget_id=launch.budget_id,
        evidence={"reason": reason, "reserved_usd": format_usd(launch.reserved_usd)},
    )


def claim_of(session: Session, claim: str, now: datetime) -> LaunchRow:
    """The launch a claim secret is for, locked, if it may still be claimed: NotFound for a
    secret no launch has or whose claim expired, worded alike (a guessed secret learns nothing
    of whether it once was one); Conflict for one claimed already."""
    launch = repo.launch_by_claim(session, digest(claim))
    if launch is None or launch.claim_expires_at <= now:
        raise NotFound(
            "no launch has this claim secret, or its claim expired: check GOVERNOR_CLAIM (a "
            "claim works once, within GOVERNOR_CLAIM_TTL_S of its launch's acceptance)"
        )
    if launch.claimed_at is not None:
        raise Conflict(
            f"launch {launch.id}'s claim was already used (run {launch.run_id}): a claim works "
            "once; the run's id and job token went to the first claimant"
        )
    return launch
