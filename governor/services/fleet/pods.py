"""Registering pods under a budget, and asking for a manual, preserving stop."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import PodRow, StopOrderRow
from governor.domain.errors import Conflict, Invalid, Unavailable
from governor.domain.model import BudgetState, Category, PodState, RateSource, Severity
from governor.domain.money import ZERO, dollars_per_hour, format_usd
from governor.domain.ports import (
    AnyProvider,
    Billed,
    Locates,
    PodDescription,
    ProviderError,
    ReportsBilling,
    StopsPreserving,
    Storage,
    TerminateOnly,
)
from governor.services import events
from governor.services.context import ServiceContext
from governor.services.ids import new_id
from governor.services.money import billing, team_money
from governor.services.money.book import open_book
from governor.services.plans import admission, launches
from governor.services.security.tokens import Principal
from governor.services.stopping import provider_states, stop_times
from governor.services.stopping.enforcement import enforce


@dataclass(frozen=True)
class Registration:
    provider: str
    provider_ref: str
    hourly_rate_usd: Decimal | None = None
    gpu_type: str | None = None
    gpu_count: int | None = None
    storage_gb: float = 0.0
    storage_usd_per_gb_month: Decimal = ZERO
    stopped_storage_usd_per_gb_month: Decimal | None = None
    local: bool = False  # this server samples the pod's GPUs itself
    node: str | None = None  # the machine it runs on: that machine's agent reports for it
    gpu_uuids: list[str] | None = None  # its own GPUs on a shared machine; None: all
    process_pids: list[int] | None = None  # its own processes there, by PID
    process_pattern: str | None = None  # and/or by name (a glob); neither: every process
    persistent_filesystem: str | None = None  # terminate-only: where checkpoints must land
    persistent_mount: str | None = None  # where it is mounted, where the provider cannot say
    acknowledge_loss: str | None = None  # why it may register though a stop loses its workspace
    plan_id: str | None = None  # the admitted plan it runs under
    name: str | None = None  # what people call it within its budget; None: the provider's ref
    launch_id: str | None = None  # the accepted launch it came from: its reservation released


def register(
    session: Session,
    ctx: ServiceContext,
    budget_id: str,
    reg: Registration,
    now: datetime,
    *,
    by: Principal | None = None,
) -> PodRow:
    """Put a pod under a budget. The provider is asked first: its rate wins over a declared one.

    A pod whose stop would lose its workspace registers only with `acknowledge_loss`, an
    operator's (`by`) written reason; one no stop call works for (a one-time Spot instance)
    is governed as terminate-only."""
    provider = ctx.provider(reg.provider)
    try:
        described = provider.describe(reg.provider_ref)
    except ProviderError as exc:
        if exc.retryable:
            raise Unavailable(f"{reg.provider} did not answer: {exc}") from exc
        raise Invalid(f"{reg.provider} cannot describe {reg.provider_ref!r}: {exc}") from exc
    billed = _billed_so_far(provider, reg.provider_ref, now)
    budget = repo.get_budget(session, budget_id, lock=True)
    if budget.state is not BudgetState.OPEN:
        raise Conflict(
            f"budget {budget.id} is {budget.state.value}: no new pods until an approved "
            "extension reopens it"
        )
    team_money.refuse_if_held(session, budget.team_id, "new pod", now)
    ceiling = open_book(session, budget.id, now, ctx.config).figures.effective_ceiling
    launch = None if reg.launch_id is None else launches.of_pod(session, reg.launch_id, budget.id)
    plan_id = reg.plan_id if reg.plan_id is not None or launch is None else launch.plan_id
    plan = admission.bind(session, budget, plan_id, ceiling)
    if repo.pod_by_ref(session, reg.provider, reg.provider_ref) is not None:
        raise Conflict(f"{reg.provider} pod {reg.provider_ref!r} is already registered")
    name = reg.provider_ref if reg.name is None else reg.name
    if (named := repo.pod_named(session, budget.id, name)) is not None:
        raise Conflict(
            f"budget {budget.id} already has a pod named {name!r} ({named.id}): give this one "
            "another name"
        )
    terminate_only = _terminate_only(reg, provider, described)
    mount = _persistent_mount(reg, described.filesystems)
    region = provider.region_of(reg.provider_ref) if isinstance(provider, Locates) else None
    learned_s, stops = stop_times.learned(session, reg.provider, region)
    if described.hourly_rate_usd is not None:
        rate, source = described.hourly_rate_usd, RateSource.PROVIDER
    elif reg.hourly_rate_usd is not None:
        rate, source = reg.hourly_rate_usd, RateSource.DECLARED
    else:
        raise Invalid(
            f"{reg.provider} does not report an hourly rate for {reg.provider_ref!r}: "
            "declare hourly_rate_usd"
        )
    storage = described.storage or Storage(
        Decimal(str(reg.storage_gb)),
        reg.storage_usd_per_gb_month,
        reg.storage_usd_per_gb_month
        if reg.stopped_storage_usd_per_gb_month is None
        else reg.stopped_storage_usd_per_gb_month,
    )
    pod = PodRow(
        id=new_id("pod"),
        budget_id=budget.id,
        provider=reg.provider,
        provider_ref=reg.provider_ref,
        name=name,
        gpu_type=reg.gpu_type,
        gpu_count=reg.gpu_count,
        hourly_rate_usd=rate,
        rate_source=source,
        storage_gb=float(storage.gb),
        storage_usd_per_gb_month=storage.usd_per_gb_month,
        stopped_storage_usd_per_gb_month=storage.stopped_usd_per_gb_month,
        stop_latency_s=provider.stop_latency_s,
        region=region,
        learned_stop_latency_s=learned_s,
        learned_from_stops=stops,
        local=reg.local,
        node=reg.node,
        gpu_uuids=reg.gpu_uuids,
        process_pids=reg.process_pids,
        process_pattern=reg.process_pattern,
        terminate_only=terminate_only,
        persistent_filesystem=reg.persistent_filesystem,
        persistent_mount=mount,
        cannot_preserve=described.cannot_preserve,
        loss_acknowledged=reg.acknowledge_loss,
        loss_acknowledged_by=None if reg.acknowledge_loss is None or by is None else by.said,
        plan_id=None if plan is None else plan.id,
        state=described.state,
        state_known=True,  # until the provider's word is noted, below
        accrued_until=now,
        created_at=now,
    )
    session.add(pod)
    session.flush()
    provider_states.note(session, pod, described.provider_state, described.state_known, now)
    if launch is not None:
        launches.tie(session, pod, launch, now)
    if billed is not None:
        billing.book_billed(session, pod.id, billed, now)
    declared_differs = reg.hourly_rate_usd is not None and reg.hourly_rate_usd != rate
    if reg.acknowledge_loss is not None:
        _record_acknowledged_loss(session, pod, reg.acknowledge_loss, now, by)
    if terminate_only:
        _warn_terminate_only(session, pod, now)
    events.record(
        session,
        now,
        Severity.WARNING if declared_differs else Severity.INFO,
        Category.OPERATOR,
        f"pod:{pod.id}",
        f"Pod {reg.provider}:{reg.provider_ref}"
        + ("" if name == reg.provider_ref else f" ({name})")
        + f" registered at {dollars_per_hour(rate)} "
        f"({source.value} rate)"
        + (
            f"; the declared {dollars_per_hour(reg.hourly_rate_usd)} was overridden."
            if declared_differs and reg.hourly_rate_usd is not None
            else "."
        ),
        budget_id=budget.id,
        evidence={
            "name": name,
            "hourly_rate_usd": format_usd(rate),
            "rate_source": source.value,
            "declared_rate_usd": None
            if reg.hourly_rate_usd is None
            else format_usd(reg.hourly_rate_usd),
            "state": described.state.value,
            "storage_gb": float(storage.gb),
            "storage_source": "declared" if described.storage is None else "provider",
        },
    )
    return pod


def _billed_so_far(provider: AnyProvider, ref: str, now: datetime) -> Billed | None:
    """What the provider has billed so far, so later bills are compared from registration on.
    Asked before the budget is locked; a provider that does not answer now (or does not
    report billing) gets its baseline at the next reconciliation."""
    if not isinstance(provider, ReportsBilling):
        return None
    try:
        return provider.billed({ref: now})[ref]
    except ProviderError:
        return None


def _terminate_only(reg: Registration, provider: AnyProvider, described: PodDescription) -> bool:
    """Whether the pod is governed as terminate-only (no stop call works for it), once a
    loss a stop or terminate would cause is acknowledged where it must be."""
    stops = isinstance(provider, StopsPreserving)
    terminate_only = described.terminate_only or not stops
    if terminate_only and not isinstance(provider, TerminateOnly):
        raise Invalid(
            f"{reg.provider} pod {reg.provider_ref!r} cannot be stopped, and the governor "
            f"cannot terminate it: {described.cannot_preserve or 'no stop call works for it'}"
        )
    if reg.acknowledge_loss is not None and described.cannot_preserve is None:
        raise Invalid(
            f"{reg.provider} pod {reg.provider_ref!r} loses nothing when it is stopped: leave "
            "acknowledge_loss out"
        )
    # a terminate-only provider's pods (Lambda's) are held until a checkpoint is safe, as ever
    if described.cannot_preserve and stops and reg.acknowledge_loss is None:
        raise Invalid(
            f"{reg.provider} pod {reg.provider_ref!r} cannot be stopped "
            + (
                "at all, only terminated, which loses its workspace"
                if described.terminate_only
                else "without losing its workspace"
            )
            + f": {described.cannot_preserve}. To register it "
            'anyway, say why the loss is acceptable in acknowledge_loss: "<why>" '
            "(governor pod add --acknowledge-loss TEXT)"
        )
    return terminate_only


def _persistent_mount(reg: Registration, filesystems: Mapping[str, str | None]) -> str | None:
    """Where the named persistent filesystem is mounted on the pod; it must be attached. The
    provider's word wins; where it cannot say (None), the registration must."""
    if reg.persistent_filesystem is None:
        if reg.persistent_mount is not None:
            raise Invalid("persistent_mount needs persistent_filesystem: the filesystem mounted")
        return None
    if reg.persistent_filesystem not in filesystems:
        attached = ", ".join(sorted(filesystems)) or "none"
        raise Invalid(
            f"{reg.provider} pod {reg.provider_ref!r} has no filesystem named "
            f"{reg.persistent_filesystem!r} attached (attached: {attached})"
        )
    said = filesystems[reg.persistent_filesystem]
    if said is None and reg.persistent_mount is None:
        raise Invalid(
            f"{reg.provider} does not say where {reg.persistent_filesystem!r} is mounted on "
            f"{reg.provider_ref!r}: declare persistent_mount (an absolute path)"
        )
    if said is not None and reg.persistent_mount not in (None, said):
        raise Invalid(
            f"{reg.provider} says {reg.persistent_filesystem!r} is mounted at {said}, not "
            f"{reg.persistent_mount}: leave persistent_mount out"
        )
    mount = said or reg.persistent_mount
    if mount is None or not posixpath.isabs(mount):
        raise Invalid(f"persistent_mount must be an absolute path, not {mount!r}")
    return mount


def _record_acknowledged_loss(
    session: Session, pod: PodRow, why: str, now: datetime, by: Principal | None
) -> None:
    """The operator's written acknowledgement, told and kept with who wrote it."""
    who = "an operator" if by is None else by.said
    events.record(
        session,
        now,
        Severity.WARNING,
        Category.OPERATOR,
        f"pod:{pod.id}",
        f"Pod {pod.provider}:{pod.provider_ref} registered by {who} although a "
        + ("terminate" if pod.terminate_only else "stop")
        + f" loses its workspace ({pod.cannot_preserve}). Acknowledged: {why}",
        budget_id=pod.budget_id,
        evidence={
            "acknowledge_loss": why,
            "cannot_preserve": pod.cannot_preserve,
            "terminate_only": pod.terminate_only,
            "by": None if by is None else by.evidence,
        },
    )


def _warn_terminate_only(session: Session, pod: PodRow, now: datetime) -> None:
    if pod.persistent_filesystem:
        message = (
            f"{pod.provider} cannot stop this pod, only terminate it: the governor will terminate "
            f"this one only after the job acknowledges a checkpoint under {pod.persistent_mount} "
            f"(filesystem {pod.persistent_filesystem!r}); otherwise it alerts and keeps billing."
        )
    else:
        message = (
            f"{pod.provider} cannot stop this pod, only terminate it, and no persistent filesystem "
            "was named: the governor will never terminate this pod. At a limit it alerts, and "
            "the pod keeps billing until someone stops it. Register it with "
            "persistent_filesystem to let the governor terminate it after a checkpoint there."
        )
    events.record(
        session,
        now,
        Severity.WARNING,
        Category.PROVIDER,
        f"pod:{pod.id}",
        message,
        budget_id=pod.budget_id,
        evidence={
            "persistent_filesystem": pod.persistent_filesystem,
            "persistent_mount": pod.persistent_mount,
        },
    )


def stop_manually(
    session: Session, ctx: ServiceContext, pod_id: str, reason: str, now: datetime, *, by: Principal
) -> StopOrderRow:
    """An operator's preserving stop. Asking again while one is under way returns that one;
    for a pod already stopped, the order that stopped it (in state stopped): nothing new.

    The ask is the event that is told (who asked and why); the stop order it leads to is
    recorded as information, so a manual stop sends one notice, not two."""
    pod = repo.get_pod(session, pod_id)
    repo.get_budget(session, pod.budget_id, lock=True)
    session.refresh(pod)
    if pod.state in (PodState.STOPPED, PodState.GONE):
        latest = repo.latest_stop_order(session, pod.id)
        if latest is None:
            raise Conflict(
                f"pod {pod.name!r} ({pod.id}) is already {pod.state.value}: nothing to stop"
                + (
                    f"; resume it with POST /v1/pods/{pod.id}/resume (governor pod resume)"
                    if pod.state is PodState.STOPPED
                    else ""
                )
            )
        return latest
    events.record(
        session,
        now,
        Severity.WARNING,
        Category.OPERATOR,
        f"pod:{pod.id}",
        f"Pod stop asked by {by.said}: {reason}",
        budget_id=pod.budget_id,
        evidence={"reason": reason, "by": by.evidence},
    )
    book = enforce(session, ctx.config, pod.budget_id, now, manual_stop_pod=pod.id)
    return repo.get_stop_order(session, book.orders[pod.id].id)  # the pass may hold a record
