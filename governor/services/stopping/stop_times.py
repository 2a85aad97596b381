"""How long each provider's stops really take, learned from the stops it carries out.

Every stop the governor asked for and the provider confirmed is timed from the first request
sent to the pod confirmed stopped: failed calls, the waits between retries and any the
provider asked for are inside it, and the provider's retryable refusals are counted and timed
apart (`StopTime`). The latest LEARN_FROM_LAST are kept per provider and region
(`stop_times`); what they teach once there are MIN_STOPS (`learned_s`: their 95th percentile,
or the worst retry sequence they have shown where any was refused) is written on every pod of
that provider and region (`learned_stop_latency_s`), where the meter reads it for the
shutdown part of committed spend: no read of its own on any pass or heartbeat.

The region is what the provider says (`Locates`); a provider that says nothing learns one
figure for all its pods.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, delete, select, update
from sqlalchemy.orm import Session

from governor.db.tables import PodRow, StopOrderRow, StopTimeRow
from governor.domain.model import Category, PodState, Severity
from governor.domain.stop_latency import LEARN_FROM_LAST, StopTime, learned_s
from governor.services import events


def _in_region(column: Any, region: str | None) -> ColumnElement[bool]:
    return column.is_(None) if region is None else column == region


def latest(session: Session, provider: str, region: str | None) -> list[StopTime]:
    """The provider and region's latest stops, newest first."""
    rows = session.execute(
        select(
            StopTimeRow.seconds,
            StopTimeRow.refusals,
            StopTimeRow.retrying_s,
            StopTimeRow.longest_retry_s,
        )
        .where(StopTimeRow.provider == provider, _in_region(StopTimeRow.region, region))
        .order_by(StopTimeRow.id.desc())
        .limit(LEARN_FROM_LAST)
    )
    return [StopTime(*row) for row in rows]


def learned(session: Session, provider: str, region: str | None) -> tuple[float | None, int]:
    """What the provider and region's latest stops teach (`learned_s`: None until there are
    MIN_STOPS) and how many stops it comes from. Read when a pod is registered."""
    stops = latest(session, provider, region)
    return learned_s(stops), len(stops)


def record(session: Session, pod: PodRow, order: StopOrderRow, now: datetime) -> None:
    """A stop the provider has confirmed: time it, keep the latest LEARN_FROM_LAST of its
    provider and region, and put what they teach on every pod of theirs. The first time the
    learned figure exceeds the pod's declared one, say so."""
    if order.sent_at is None:  # never asked of the provider (stopped outside the governor)
        return
    seconds = max(0.0, (now - order.sent_at).total_seconds())
    session.add(
        StopTimeRow(
            provider=pod.provider,
            region=pod.region,
            pod_id=pod.id,
            stop_order_id=order.id,
            sent_at=order.sent_at,
            stopped_at=now,
            seconds=seconds,
            attempts=order.attempts,
            refusals=order.refusals,
            retrying_s=0.0
            if order.retried_at is None
            else (order.retried_at - order.sent_at).total_seconds(),
            longest_retry_s=order.longest_retry_s,
        )
    )
    session.flush()
    key = (StopTimeRow.provider == pod.provider, _in_region(StopTimeRow.region, pod.region))
    kept = select(StopTimeRow.id).where(*key).order_by(StopTimeRow.id.desc()).limit(LEARN_FROM_LAST)
    session.execute(delete(StopTimeRow).where(*key, StopTimeRow.id.not_in(kept)))
    exceeded_before = (
        pod.learned_stop_latency_s is not None and pod.learned_stop_latency_s > pod.stop_latency_s
    )
    figure, stops = learned(session, pod.provider, pod.region)
    session.execute(
        update(PodRow)
        .where(
            PodRow.provider == pod.provider,
            _in_region(PodRow.region, pod.region),
            PodRow.state != PodState.GONE,
        )
        .values(learned_stop_latency_s=figure, learned_from_stops=stops)
        .execution_options(synchronize_session="fetch")
    )
    if figure is not None and figure > pod.stop_latency_s and not exceeded_before:
        _tell_exceeded(session, pod, figure, stops, now)


def _tell_exceeded(session: Session, pod: PodRow, figure: float, stops: int, now: datetime) -> None:
    where = pod.provider if pod.region is None else f"{pod.provider} in {pod.region}"
    events.record(
        session,
        now,
        Severity.WARNING,
        Category.PROVIDER,
        f"provider:{pod.provider}",
        f"{where} takes longer to stop a pod than it declares: {figure:.1f} s (learned from "
        f"its latest {stops} stops, retries included) against "
        f"{pod.stop_latency_s:.1f} s declared. The shutdown part of committed spend now holds "
        "the learned figure, so its budgets stop sooner.",
        budget_id=None,
        evidence={
            "provider": pod.provider,
            "region": pod.region,
            "learned_stop_latency_s": round(figure, 3),
            "declared_stop_latency_s": pod.stop_latency_s,
            "stops": stops,
        },
    )
