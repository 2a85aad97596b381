"""A run as it is read: where it stands, its checkpoint, its directive, its policy and
health rules, its latest metrics and its GPUs' memory peaks; and the reads and the start
that answer with it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import RunRow
from governor.domain.model import Action, Phase, Reason, RunStatus
from governor.domain.paging import Page, PageRequest
from governor.domain.teams import EVERY_TEAM, TeamScope
from governor.services.context import GovernorConfig
from governor.services.runs import acknowledgements, claims, lifecycle
from governor.services.security.tokens import Principal


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: str
    at: datetime


@dataclass(frozen=True)
class RunDirective:
    action: Action
    reason: Reason | None
    message: str | None


@dataclass(frozen=True)
class Peak:
    gpu_uuid: str
    gpu_name: str
    peak_used_bytes: int
    memory_total_bytes: int | None
    at: datetime


@dataclass(frozen=True)
class Run:
    id: str
    budget_id: str
    pod_id: str
    name: str
    attempt: int = field(metadata={"doc": "1, then one more each time its pod is resumed"})
    status: RunStatus
    phase: Phase | None
    step: int
    total_steps: int | None
    heartbeat_timeout_s: float
    checkpoint_grace_s: float
    last_heartbeat_at: datetime | None
    checkpoint: Checkpoint | None
    directive: RunDirective
    policy: dict[str, float | str]
    health_rules: tuple[dict[str, Any], ...] = field(
        metadata={"doc": "the training-health rules the run's metrics are judged by"}
    )
    metrics: dict[str, Any] | None = field(metadata={"doc": "the latest metrics its job sent"})
    peaks: tuple[Peak, ...]
    created_at: datetime
    started_at: datetime = field(metadata={"doc": "when its current attempt began"})
    ended_at: datetime | None = field(
        metadata={"doc": "when the run ended: its job said so, its pod stopped, or it was lost"}
    )
    acknowledged_at: datetime | None = field(
        metadata={"doc": "when an operator last acknowledged it lost (null: never)"}
    )
    acknowledged_by: str | None = field(metadata={"doc": "who did"})


@dataclass(frozen=True)
class CreatedRun(Run):
    token: str = field(metadata={"doc": "The job's token. Shown once: store it now."})


def run(session: Session, row: RunRow) -> Run:
    checkpoint = None
    if row.checkpoint_path is not None and row.checkpoint_at is not None:
        checkpoint = Checkpoint(row.checkpoint_step or 0, row.checkpoint_path, row.checkpoint_at)
    return Run(
        id=row.id,
        budget_id=row.budget_id,
        pod_id=row.pod_id,
        name=row.name,
        attempt=row.attempt,
        status=row.status,
        phase=row.phase,
        step=row.step,
        total_steps=row.total_steps,
        heartbeat_timeout_s=row.heartbeat_timeout_s,
        checkpoint_grace_s=row.checkpoint_grace_s,
        last_heartbeat_at=row.last_heartbeat_at,
        checkpoint=checkpoint,
        directive=RunDirective(row.directive, row.directive_reason, row.directive_message),
        policy=row.policy or {},
        health_rules=tuple(row.health_rules or ()),
        metrics=row.metrics,
        peaks=tuple(
            Peak(p.gpu_uuid, p.gpu_name, p.peak_used_bytes, p.memory_total_bytes, p.at)
            for p in repo.peaks_of(session, [row.id])
        ),
        created_at=row.created_at,
        started_at=row.started_at,
        ended_at=row.ended_at,
        acknowledged_at=row.acknowledged_at,
        acknowledged_by=row.acknowledged_by,
    )


def get(session: Session, run_id: str) -> Run:
    return run(session, repo.get_run(session, run_id))


def page(
    session: Session,
    request: PageRequest,
    *,
    budget_id: str | None = None,
    name: str | None = None,
    status: RunStatus | None = None,
    scope: TeamScope = EVERY_TEAM,
) -> Page[Run]:
    """A page of runs (of the scope's teams), oldest first, narrowed by budget, name and
    status where given."""
    rows = repo.runs(session, request, budget_id=budget_id, name=name, status=status, scope=scope)
    return Page([run(session, r) for r in rows.items], rows.next_cursor)


def create(
    session: Session,
    config: GovernorConfig,
    budget_id: str,
    spec: lifecycle.RunSpec,
    now: datetime,
) -> CreatedRun:
    """Start the run (lifecycle.create): it, with its job's token, shown once."""
    row, token = lifecycle.create(session, config, budget_id, spec, now)
    return CreatedRun(**vars(run(session, row)), token=token)


def claim(
    session: Session,
    config: GovernorConfig,
    secret: str,
    now: datetime,
    *,
    name: str | None,
    total_steps: int | None,
) -> CreatedRun:
    """A launched job's claim exchanged for its run (claims.claim): it, with its job token."""
    row, token = claims.claim(session, config, secret, now, name=name, total_steps=total_steps)
    return CreatedRun(**vars(run(session, row)), token=token)


def acknowledge(session: Session, run_id: str, reason: str, now: datetime, *, by: Principal) -> Run:
    """Acknowledge a lost run (acknowledgements.acknowledge): the run as it then stands."""
    return run(session, acknowledgements.acknowledge(session, run_id, reason, now, by=by))
