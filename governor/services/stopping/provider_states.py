"""A pod's state as its provider reports it: recorded on the pod, and an event when it is a
state the provider does not document.

Such a state keeps the pod's last known state (for people and for its stop order), records
the provider's word with `state_known` False, and is told once per new word; the pod's
compute accrues as running meanwhile (`money.book.metered_state`). A documented state clears
it, with an event that says so. The caller of `note` holds the pod's budget's lock, as every
writer of its ledger does. A pod in an unknown state with no stop order asking about it is
asked again at every stop pass (`recheck`), in the leader's passes like every provider call.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.engine import read_only, unit_of_work
from governor.db.tables import PodRow, StopOrderRow
from governor.domain.errors import Invalid, NotLeader
from governor.domain.model import Category, PodState, Severity
from governor.domain.ports import ProviderError
from governor.domain.stop_order import ACTIVE_STATES
from governor.services import events
from governor.services.context import ServiceContext
from governor.services.money.metering import accrue_pod

_UNKNOWN_UNASKED = select(PodRow.id, PodRow.provider, PodRow.provider_ref).where(
    PodRow.state_known.is_(False),
    PodRow.state != PodState.GONE,
    ~exists().where(StopOrderRow.pod_id == PodRow.id, StopOrderRow.state.in_(ACTIVE_STATES)),
)


def recheck(ctx: ServiceContext) -> int:
    """Ask the provider again about each pod it last said was in a state it does not
    document, where no stop order is asking already; returns how many answered."""
    with read_only(ctx.sessions) as session:
        pods = session.execute(_UNKNOWN_UNASKED).all()
    answered = 0
    for pod_id, provider, ref in pods:
        if not ctx.leading():  # paused past the lease: the next leader asks
            raise NotLeader(f"the lease ran out before asking about pod {pod_id}")
        try:
            described = ctx.provider(provider).describe(ref)
        except (ProviderError, Invalid):
            continue  # asked again at the next pass
        with unit_of_work(ctx.sessions) as session:
            pod = repo.get_pod(session, pod_id)
            repo.get_budget(session, pod.budget_id, lock=True)
            session.refresh(pod)
            note(session, pod, described.provider_state, described.state_known, ctx.clock.now())
        answered += 1
    return answered


def note(
    session: Session, pod: PodRow, provider_state: str | None, known: bool, now: datetime
) -> None:
    """Record that the provider says `pod` is in `provider_state` (None: it gave no word),
    one it documents or not (`known`). The pod keeps the word only while it is unknown."""
    if known == pod.state_known and (known or provider_state == pod.provider_state):
        return  # nothing new to tell
    if known != pod.state_known:
        accrue_pod(session, pod, now)  # charged as it was up to now, before its rates change
    was, pod.state_known = pod.provider_state, known
    pod.provider_state = None if known else provider_state
    evidence = {
        "provider_state": provider_state,
        "state_known": known,
        "governor_state": pod.state.value,
        "previous_provider_state": was,
    }
    if known:
        events.record(
            session,
            now,
            Severity.INFO,
            Category.PROVIDER,
            f"pod:{pod.id}",
            f"{pod.provider} reports a state it documents again"
            + ("" if provider_state is None else f" ({provider_state!r})")
            + f" after {was!r}: the pod is metered as {pod.state.value} again.",
            budget_id=pod.budget_id,
            evidence=evidence,
            always=True,  # whoever was told of the unknown state is told it has passed
        )
        return
    events.record(
        session,
        now,
        Severity.WARNING,
        Category.PROVIDER,
        f"pod:{pod.id}",
        f"{pod.provider} says pod {pod.provider_ref!r} is {provider_state!r}, a state it does "
        f"not document. The governor keeps its last known state ({pod.state.value}), counts "
        "its compute as running until a documented state arrives, and never takes it for "
        "stopped: a stop order goes on asking.",
        budget_id=pod.budget_id,
        evidence=evidence,
    )
