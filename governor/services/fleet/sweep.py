"""The account sweep: every configured provider account listed once a billing interval, so
that no pod bills unseen.

A pod carrying the budget label is registered under that budget when its launch label names a
launch of that budget still waiting for its pod, or when the budget adopts labelled pods
(`adopt_labelled_pods`); otherwise it stays ungoverned, and the budget it names is warned. It
is registered with the registration rules every pod meets (`pods.register`: one whose stop
would lose its workspace is refused, one no stop call works for is governed as
terminate-only; a budget that requires a plan refuses a pod without one). A billing pod no
budget governs, or one whose registration was refused, is an ungoverned pod: kept in
`ungoverned_pods`, told once as a critical event (a notice to the webhooks), shown at the top
of /status and on /metrics. An operator's rules (per account, `GovernorConfig.sweep_rules`)
may adopt it into a budget, or stop it with the provider's preserving stop once it has been
ungoverned for the rule's grace: never earlier, never without a rule, and never by
terminating it.

Leader-only: the scheduler runs it on the lease's fenced sessions, and each provider call
goes out only while this replica still holds the lease.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import UngovernedPodRow
from governor.domain.errors import GovernorError, NotLeader
from governor.domain.launch_labels import BUDGET_LABEL, LAUNCH_LABEL
from governor.domain.model import Category, Severity
from governor.domain.money import dollars_per_hour, format_usd
from governor.domain.ports import (
    AnyProvider,
    CallOutcome,
    Listed,
    ListsPods,
    ProviderError,
    StopsPreserving,
)
from governor.domain.sweep import Fate, Labelled, Verdict, judge, stop_due
from governor.services import events
from governor.services.context import ServiceContext
from governor.services.fleet import pods

log = logging.getLogger("governor.sweep")
# More pods than this found ungoverned in one account in one pass are told in one event
# (naming TOLD_BY_NAME of them, each in its evidence up to TOLD_IN_EVIDENCE): one notice
TOLD_ONE_BY_ONE = 10
TOLD_BY_NAME = 10
TOLD_IN_EVIDENCE = 200


@dataclass
class Swept:
    """What one pass did, account by account added up."""

    accounts: int = 0
    listed: int = 0
    registered: int = 0
    ungoverned: int = 0
    stops_sent: int = 0
    unlisted: tuple[str, ...] = ()  # accounts that could not be listed this pass


def sweep_all(ctx: ServiceContext) -> Swept:
    """List every provider account that can list its pods, and sweep each."""
    swept = Swept()
    unlisted: list[str] = []
    for name, provider in sorted(ctx.providers.items()):
        if not isinstance(provider, ListsPods):
            continue
        if not ctx.leading():  # paused past the lease: the next leader lists
            raise NotLeader(f"the lease ran out before listing {name}")
        try:
            listed = list(provider.pods())
        except ProviderError as exc:
            log.warning("could not list the pods of %s for the account sweep: %s", name, exc)
            unlisted.append(name)
            continue
        sweep_account(ctx, name, provider, listed, swept)
    swept.unlisted = tuple(unlisted)
    if swept.registered or swept.ungoverned or swept.stops_sent or unlisted:
        log.info(
            "account sweep: %d account(s), %d pod(s) listed, %d registered, %d ungoverned, "
            "%d stop(s) sent%s",
            swept.accounts,
            swept.listed,
            swept.registered,
            swept.ungoverned,
            swept.stops_sent,
            f"; not listed: {', '.join(unlisted)}" if unlisted else "",
        )
    return swept


def sweep_account(
    ctx: ServiceContext,
    name: str,
    provider: AnyProvider,
    listed: Sequence[Listed],
    swept: Swept | None = None,
) -> Swept:
    """One account's listing swept: labelled and adopted pods registered, the ungoverned
    kept and told, and the stops their rules have come due for sent."""
    swept = swept or Swept()
    now = ctx.clock.now()
    named = {p.labels[LAUNCH_LABEL] for p in listed if LAUNCH_LABEL in p.labels}
    with ctx.unit_of_work() as session:
        registered = repo.provider_refs(session, name)
        budgets = repo.budget_keys(session)
        labelled = Labelled(
            repo.budgets_adopting_labelled_pods(session), repo.launches_waiting(session, named)
        )
    verdicts = judge(name, listed, registered, budgets, ctx.config.sweep_rules, labelled)
    ungoverned = [v for v in verdicts if v.fate is Fate.UNGOVERNED]
    for verdict in verdicts:
        if verdict.fate in (Fate.REGISTER, Fate.ADOPT):
            refused = _register(ctx, name, verdict, now)
            if refused is None:
                swept.registered += 1
            else:
                ungoverned.append(replace(verdict, fate=Fate.UNGOVERNED, reason=refused))
    with ctx.unit_of_work() as session:
        due = keep(session, name, ungoverned, now)
    swept.accounts += 1
    swept.listed += len(listed)
    swept.ungoverned += len(ungoverned)
    for ref in due:
        swept.stops_sent += _stop(ctx, name, provider, ref)
    return swept


def _register(ctx: ServiceContext, name: str, verdict: Verdict, now: datetime) -> str | None:
    """Register the pod under its verdict's budget (and, where its label names the launch a gate
    accepted, as that launch's: under its plan, its reservation released); None when it is,
    else why not."""
    assert verdict.budget_id is not None
    pod = verdict.pod
    if not ctx.leading():  # registering asks the provider about the pod
        raise NotLeader(f"the lease ran out before registering {name}:{pod.ref}")
    try:
        with ctx.unit_of_work() as session:
            reg = pods.Registration(
                provider=name,
                provider_ref=pod.ref,
                gpu_type=pod.gpu_type,
                gpu_count=pod.gpu_count,
                launch_id=verdict.launch,
            )
            row = pods.register(session, ctx, verdict.budget_id, reg, now)
            if verdict.fate is Fate.ADOPT:
                how = "an adoption rule"
            elif verdict.launch is not None:
                how = "its launch label"
            else:
                how = "its budget label, the budget adopting labelled pods"
            unknown = verdict.launch_id is not None and verdict.launch is None
            events.record(
                session,
                now,
                Severity.WARNING if unknown else Severity.INFO,
                Category.GOVERNOR,
                f"pod:{row.id}",
                f"The account sweep found {name}:{pod.ref} billing and registered it under "
                f"this budget, by {how}"
                + (
                    f"; its launch label {verdict.launch_id!r} names none of this budget's "
                    "launches waiting for a pod, so it is tied to none."
                    if unknown
                    else "."
                ),
                budget_id=row.budget_id,
                evidence={"labels": dict(pod.labels), "name": pod.name, "by": how},
            )
    except NotLeader:
        raise
    except GovernorError as exc:
        return f"its registration was refused: {exc}"
    return None


def keep(
    session: Session, provider: str, ungoverned: Sequence[Verdict], now: datetime
) -> list[str]:
    """Keep the account's ungoverned pods as found now: a new one (or one ungoverned for a new
    reason) told as a critical event, those no longer ungoverned dropped. Returns the refs
    whose stop rule's grace is over and whose stop was not sent yet."""
    rows = {row.provider_ref: row for row in repo.ungoverned_pods(session, provider)}
    due: list[str] = []
    told = [v for v in ungoverned if (row := rows.get(v.pod.ref)) is None or row.reason != v.reason]
    with session.no_autoflush:  # written once at the end, not before each event's lookup
        if len(told) > TOLD_ONE_BY_ONE:
            _tell_many(session, provider, told, now)
        else:
            for verdict in told:
                _tell(session, provider, verdict, now)
        _warn_not_adopted(session, provider, told, now)
        for verdict in ungoverned:
            _keep_one(session, provider, verdict, rows.pop(verdict.pod.ref, None), due, now)
    for gone in rows.values():
        session.delete(gone)
    return due


def _keep_one(
    session: Session,
    provider: str,
    verdict: Verdict,
    row: UngovernedPodRow | None,
    due: list[str],
    now: datetime,
) -> None:
    """One ungoverned pod kept (`row`: as kept before, None when new); its ref added to `due`
    when its rule's stop is due."""
    pod = verdict.pod
    rate = pod.description.hourly_rate_usd
    if row is None:
        row = UngovernedPodRow(
            provider=provider, provider_ref=pod.ref, first_seen_at=now, labels={}
        )
        session.add(row)
    row.name, row.labels, row.reason = pod.name, dict(pod.labels), verdict.reason
    row.gpu_type, row.gpu_count, row.hourly_rate_usd = pod.gpu_type, pod.gpu_count, rate
    row.launch_id, row.last_seen_at = verdict.launch_id, now
    row.stop_after_s = verdict.stop_after_s
    if row.stop_sent_at is None and stop_due(row.first_seen_at, row.stop_after_s, now):
        refused = _cannot_stop(pod)
        if refused is None:
            due.append(pod.ref)
        elif row.stop_detail != refused:
            row.stop_detail = refused
            _tell_not_stopped(session, provider, pod, refused, now)


def _cannot_stop(pod: Listed) -> str | None:
    """Why the rule's stop may not be sent: it would lose the workspace, or only a terminate
    works; None when a preserving stop works."""
    described = pod.description
    if described.terminate_only:
        return "no stop call works for it, only a terminate, which the sweep never sends"
    if described.cannot_preserve:
        return f"a stop would lose its workspace: {described.cannot_preserve}"
    return None


def _tell(session: Session, provider: str, verdict: Verdict, now: datetime) -> None:
    pod = verdict.pod
    rate = pod.description.hourly_rate_usd
    named = f" ({pod.name})" if pod.name and pod.name != pod.ref else ""
    costs = "at a rate it does not say" if rate is None else f"at {dollars_per_hour(rate)}"
    then = (
        f" A rule stops it, keeping its workspace, after {verdict.stop_after_s:g} s ungoverned."
        if verdict.stop_after_s is not None
        else " Register it under a budget, or stop it."
    )
    events.record(
        session,
        now,
        Severity.CRITICAL,
        Category.GOVERNOR,
        f"{provider}:{pod.ref}"[:100],
        f"Ungoverned pod: {provider}:{pod.ref}{named} bills {costs} under no budget, so no "
        f"ceiling stops it ({verdict.reason}).{then}",
        budget_id=None,
        evidence={
            "provider": provider,
            "provider_ref": pod.ref,
            "name": pod.name,
            "labels": dict(pod.labels),
            "gpu_type": pod.gpu_type,
            "gpu_count": pod.gpu_count,
            "hourly_rate_usd": None if rate is None else format_usd(rate),
            "reason": verdict.reason,
            "stop_after_s": verdict.stop_after_s,
        },
    )


def _tell_many(session: Session, provider: str, told: Sequence[Verdict], now: datetime) -> None:
    """Many pods of one account found ungoverned in one pass, told in one critical event
    (one notice, not a flood of them), naming the first TOLD_BY_NAME."""
    rates = [v.pod.description.hourly_rate_usd for v in told]
    known = sum((r for r in rates if r is not None), Decimal(0))
    named = ", ".join(v.pod.ref for v in told[:TOLD_BY_NAME])
    more = len(told) - TOLD_BY_NAME
    events.record(
        session,
        now,
        Severity.CRITICAL,
        Category.GOVERNOR,
        f"{provider}:"[:100],
        f"Ungoverned pods: {len(told)} pods of {provider} bill under no budget, so no ceiling "
        f"stops them, {dollars_per_hour(known)} together where their rate is said: {named}"
        + (f" and {more} more" if more > 0 else "")
        + ". /status lists each with why; register them under a budget, or stop them.",
        budget_id=None,
        evidence={
            "provider": provider,
            "count": len(told),
            "hourly_rate_usd": format_usd(known),
            "pods": [
                {"provider_ref": v.pod.ref, "name": v.pod.name, "reason": v.reason}
                for v in told[:TOLD_IN_EVIDENCE]
            ],
        },
    )


def _warn_not_adopted(
    session: Session, provider: str, told: Sequence[Verdict], now: datetime
) -> None:
    """Each budget whose label newly found pods carry, that did not adopt them, warned once
    per pass (naming up to TOLD_BY_NAME of them): someone launched under its name."""
    by_budget: dict[str, list[Verdict]] = {}
    for verdict in told:
        if verdict.not_adopted_by is not None:
            by_budget.setdefault(verdict.not_adopted_by, []).append(verdict)
    for budget_id, verdicts in by_budget.items():
        refs = ", ".join(f"{provider}:{v.pod.ref}" for v in verdicts[:TOLD_BY_NAME])
        more = len(verdicts) - TOLD_BY_NAME
        events.record(
            session,
            now,
            Severity.WARNING,
            Category.GOVERNOR,
            f"budget:{budget_id}",
            f"A pod labelled for this budget was not adopted: {refs}"
            + (f" and {more} more" if more > 0 else "")
            + f" carr{'ies' if len(verdicts) == 1 else 'y'} its {BUDGET_LABEL} label but no "
            "label naming one of its launches waiting for a pod, and this budget does not "
            "adopt labelled pods. It bills ungoverned; register it by hand if it is this "
            "budget's, or let this budget adopt labelled pods.",
            budget_id=budget_id,
            evidence={
                "provider": provider,
                "pods": [
                    {
                        "provider_ref": v.pod.ref,
                        "name": v.pod.name,
                        "labels": dict(v.pod.labels),
                    }
                    for v in verdicts[:TOLD_IN_EVIDENCE]
                ],
            },
        )


def _tell_not_stopped(
    session: Session, provider: str, pod: Listed, why: str, now: datetime
) -> None:
    events.record(
        session,
        now,
        Severity.CRITICAL,
        Category.GOVERNOR,
        f"{provider}:{pod.ref}"[:100],
        f"Ungoverned pod {provider}:{pod.ref} is past its stop rule's grace but is not "
        f"stopped: {why}. It keeps billing until someone stops it.",
        budget_id=None,
        evidence={"provider": provider, "provider_ref": pod.ref, "why": why},
    )


def _stop(ctx: ServiceContext, name: str, provider: AnyProvider, ref: str) -> int:
    """Send the rule's preserving stop for one ungoverned pod; 1 if the provider took it. A
    retryable failure is tried again at the next pass; a refusal is told once."""
    if not isinstance(provider, StopsPreserving):
        said = f"{name} cannot stop pods keeping their workspace; the sweep never terminates"
        result_outcome, detail = CallOutcome.PERMANENT, said
    else:
        if not ctx.leading():  # paused past the lease: the next leader sends it
            raise NotLeader(f"the lease ran out before stopping ungoverned {name}:{ref}")
        result = provider.stop(ref)
        result_outcome, detail = result.outcome, result.detail
    now = ctx.clock.now()
    with ctx.unit_of_work() as session:
        row = session.get(UngovernedPodRow, (name, ref))
        if row is None:
            return 0
        sent = result_outcome in (CallOutcome.DONE, CallOutcome.PENDING)
        if sent:
            row.stop_sent_at, row.stop_detail = now, detail
        if sent or (result_outcome is CallOutcome.PERMANENT and row.stop_detail != detail):
            row.stop_detail = detail
            events.record(
                session,
                now,
                Severity.WARNING if sent else Severity.CRITICAL,
                Category.GOVERNOR,
                f"{name}:{ref}"[:100],
                f"Ungoverned pod {name}:{ref} "
                + (
                    f"stopped by its sweep rule after {row.stop_after_s:g} s, keeping its "
                    f"workspace: {detail}"
                    if sent
                    else f"could not be stopped by its sweep rule: {detail}"
                ),
                budget_id=None,
                evidence={
                    "provider": name,
                    "provider_ref": ref,
                    "outcome": result_outcome.value,
                    "detail": detail,
                    "stop_after_s": row.stop_after_s,
                },
            )
    return 1 if sent else 0
