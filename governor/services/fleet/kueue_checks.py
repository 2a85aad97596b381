"""The Kueue admission check controller: the governor answers the admission checks whose
`spec.controllerName` is its own, once per pass, leader-only.

Each pass it keeps those AdmissionChecks Active (a ClusterQueue whose check is not Active
admits nothing: a governor that stops passing freezes admissions, it never lets them
through). A Workload whose quota Kueue reserved and whose check of ours is Pending is priced
and judged as a launch (`launches.judge`, reserving its price under the request key of the
Workload's uid, so a pass that is cut short finds the same reservation again): `Ready`, with
the figures, or `Rejected`, with the reasons and what to change. A Workload asking for no
GPU is Ready at no price. Once Kueue admitted it, a Workload whose owner is a registrable
kind is registered under its budget as that launch's pod (`pods.register`, the reservation
released, the meter takes over), on the `kueue` provider: its preserving stop is the check
set to `Retry`, which Kueue carries out by evicting it. Enforcement sends that stop as it
sends any: the run on the pod is told to checkpoint first, and the stop comes only when the
run acknowledged or its grace ran out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import partial

from governor.db import repository as repo
from governor.domain import kueue
from governor.domain.errors import GovernorError, Invalid, NotLeader
from governor.domain.kueue import CheckState, KueueApi
from governor.domain.model import Category, PodState, Severity
from governor.domain.ports import ProviderError
from governor.services import events
from governor.services.context import ServiceContext
from governor.services.fleet import pods
from governor.services.plans import launches
from governor.services.security.shared_secrets import shared_secret

log = logging.getLogger("governor.kueue")


@dataclass
class Answered:
    """What one pass did."""

    activated: int = 0  # AdmissionChecks marked Active
    ready: int = 0
    rejected: int = 0
    registered: int = 0
    conflicts: int = 0  # patches refused because Kueue changed the object first (next pass)
    failed: int = 0  # Workloads a call about failed (the next pass tries again)


def answer_all(ctx: ServiceContext) -> Answered:
    """Every configured cluster's Kueue answered (the `kueue` provider, where configured)."""
    answered = Answered()
    for name, api in sorted(ctx.providers.items()):
        if isinstance(api, KueueApi):
            answer(ctx, name, api, answered)
    return answered


def _lead(ctx: ServiceContext, what: str) -> None:
    if not ctx.leading():  # paused past the lease: the next leader answers
        raise NotLeader(f"the lease ran out before {what}")


def answer(
    ctx: ServiceContext, provider: str, api: KueueApi, answered: Answered | None = None
) -> Answered:
    answered = answered or Answered()
    controller, now = ctx.config.kueue_controller_name, ctx.clock.now()
    _lead(ctx, "reading Kueue's admission checks")
    ours: list[str] = []
    for check in kueue.controller_checks(api.admission_checks(), controller):
        name = str(check["metadata"]["name"])
        ours.append(name)
        patch = kueue.active_patch(check, controller, now)
        if patch is not None:
            _lead(ctx, f"marking admission check {name} Active")
            if _patched(partial(api.patch_admission_check_status, name, patch), answered):
                answered.activated += 1
    if not ours:
        return answered
    models: dict[str, str] | None = None
    for obj in api.workloads():
        try:
            workload = kueue.read_workload(obj)
        except kueue.Malformed as exc:
            log.warning("a Workload Kueue serves could not be read: %s", exc)
            continue
        mine = [c for c in ours if workload.state(c) is not None]
        if not mine or workload.finished:
            continue
        pending = [c for c in mine if workload.state(c) is CheckState.PENDING]
        try:
            if pending and workload.quota_reserved and not workload.admitted:
                if models is None:
                    models = kueue.flavor_models(api.resource_flavors())
                _judge(ctx, provider, api, workload, pending, models, answered)
            elif (
                workload.admitted
                and not workload.evicted
                and all(workload.state(c) is CheckState.READY for c in mine)
            ):
                _register(ctx, provider, workload, answered)
        except ProviderError as exc:  # this one waits for the next pass; the others go on
            answered.failed += 1
            log.warning("could not answer Kueue's %s this pass: %s", workload, exc)
    return answered


def _patched(call: Callable[[], None], answered: Answered) -> bool:
    """Send a status patch; False where the object changed since it was read (409: it is
    read again next pass)."""
    try:
        call()
    except ProviderError as exc:
        if exc.status != 409:
            raise
        answered.conflicts += 1
        return False
    return True


def _judge(
    ctx: ServiceContext,
    provider: str,
    api: KueueApi,
    workload: kueue.Workload,
    pending: list[str],
    models: Mapping[str, str],
    answered: Answered,
) -> None:
    if not workload.gpus:
        message = "governor: launch accepted: it asks for no GPU, nothing to price."
        _answer(ctx, api, workload, pending, CheckState.READY, message, answered)
        return
    held = _held(ctx, provider, workload)
    if held is not None:
        _answer(ctx, api, workload, pending, *held, answered)
        return
    labels, annotations = (
        api.owner_metadata(workload.namespace, workload.owner) if workload.owner else ({}, {})
    )
    try:
        request = kueue.launch_request(
            workload, {**labels, **workload.labels}, {**annotations, **workload.annotations}, models
        )
    except Invalid as exc:
        message = f"governor: launch refused: {exc}"
        _answer(ctx, api, workload, pending, CheckState.REJECTED, message, answered)
        return
    claim_key = shared_secret(ctx.sessions, launches.CLAIM_KEY)
    with ctx.unit_of_work() as session:
        found = launches.judge(
            session,
            ctx.config,
            request,
            ctx.clock.now(),
            reserve=True,
            claim_key=claim_key,
            request_key=workload.uid,
        )
    decision = found.decision
    message = decision.message
    if not decision.accepted:
        message += (
            " To run it: ask for less (GPUs, pods, or its governor-max-hours annotation), or "
            "have an extension of the budget approved, then set the Workload's spec.active to "
            "true again."
        )
    state = CheckState.READY if decision.accepted else CheckState.REJECTED
    _answer(ctx, api, workload, pending, state, message, answered)


def _held(
    ctx: ServiceContext, provider: str, workload: kueue.Workload
) -> tuple[CheckState, str] | None:
    """The answer to a Workload queued again whose owner is a pod of the governor's (Kueue
    queues an evicted Workload again): stopped by the governor, it is Rejected until an
    operator resumes the pod; resumed, it is Ready (its pod is metered again: nothing more is
    reserved). None when its owner is no pod of the governor's."""
    ref = None if workload.owner is None else workload.owner.ref(workload.namespace)
    if ref is None:
        return None
    with ctx.read_only() as session:
        pod = repo.pod_by_ref(session, provider, ref)
        if pod is None or pod.state is PodState.GONE:
            return None
        if pod.state in (PodState.STOPPING, PodState.STOPPED):
            return CheckState.REJECTED, (
                f"governor: launch refused: the governor stopped {ref} (pod {pod.id} of budget "
                f"{pod.budget_id}, {pod.state.value}); it runs again only when an operator "
                f"resumes it (governor pod resume {pod.id}), once its budget is open."
            )
        return CheckState.READY, (
            f"governor: launch accepted: {ref} is pod {pod.id} of budget {pod.budget_id}, "
            f"{pod.state.value}: metered as it runs."
        )


def _answer(
    ctx: ServiceContext,
    api: KueueApi,
    workload: kueue.Workload,
    pending: list[str],
    state: CheckState,
    message: str,
    answered: Answered,
) -> None:
    patch = kueue.check_patch(workload, {c: (state, message) for c in pending}, ctx.clock.now())
    _lead(ctx, f"answering {workload}")
    send = partial(api.patch_workload_status, workload.namespace, workload.name, patch)
    if _patched(send, answered):
        if state is CheckState.READY:
            answered.ready += 1
        else:
            answered.rejected += 1


def _register(
    ctx: ServiceContext, provider: str, workload: kueue.Workload, answered: Answered
) -> None:
    """An admitted Workload registered as its launch's pod, once (a registrable owner)."""
    ref = None if workload.owner is None else workload.owner.ref(workload.namespace)
    if ref is None:
        return
    now = ctx.clock.now()
    with ctx.read_only() as session:
        if repo.pod_by_ref(session, provider, ref) is not None:
            return
        launch = repo.latest_launch_by_key(session, workload.uid)
        if launch is None:  # no GPU, or a check of ours Ready that this governor never gave
            return
        budget_id, launch_id = launch.budget_id, launch.id
        per_hour = Decimal(str(launch.figures.get("per_hour_usd", "0")))
        held = launch.released_at is None
    _lead(ctx, f"registering {provider}:{ref}")
    try:
        with ctx.unit_of_work() as session:
            registration = pods.Registration(
                provider=provider,
                provider_ref=ref,
                hourly_rate_usd=per_hour,
                gpu_count=workload.gpus,
                launch_id=launch_id if held else None,
            )
            row = pods.register(session, ctx, budget_id, registration, now)
            events.record(
                session,
                now,
                Severity.INFO,
                Category.GOVERNOR,
                f"pod:{row.id}",
                f"Kueue admitted {workload} ({ref}); registered under this budget. Its stop is "
                "its admission check set to Retry (Kueue evicts it, keeping its volumes), once "
                "its run was told to checkpoint and its grace is over.",
                budget_id=row.budget_id,
                evidence={"workload": f"{workload.namespace}/{workload.name}", "uid": workload.uid},
            )
    except NotLeader:
        raise
    except GovernorError as exc:
        log.warning("Kueue admitted %s, but it could not be registered: %s", workload, exc)
        return
    answered.registered += 1
