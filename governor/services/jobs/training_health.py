"""Training health on a run's own heartbeat: its rules judge the beat's metrics, and what fires
is recorded (warning events, a checkpoint asked, a stop asked of the enforcement pass)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from governor.db.tables import RunRow
from governor.domain.health import HealthFinding, HealthRule, Kind, Response, observe
from governor.domain.model import Action, Category, Severity
from governor.services import events


def judge(
    rules: list[dict[str, Any]] | None,
    state: dict[str, Any] | None,
    metrics: Mapping[str, object] | None,
    step: int,
) -> tuple[dict[str, Any] | None, list[HealthFinding]]:
    """A run's health state after this beat's metrics, judged by the run's rules from its
    state before, and what fired (constant cost)."""
    if not metrics or not rules:
        return state, []
    return observe([HealthRule.of(r) for r in rules], state, metrics, step)


def act(session: Session, run: RunRow, findings: list[HealthFinding], now: datetime) -> bool:
    """Record what the run's health rules found; True when one asked for a stop."""
    stop = False
    for finding in findings:
        message = finding.message
        if finding.action is Response.STOP:
            message = _stop_message(run, finding)
            if run.health_stop is None:
                run.health_stop = {
                    "reason": finding.reason.value,
                    "message": message,
                    "evidence": finding.evidence,
                }
                stop = True
        elif finding.action is Response.CHECKPOINT and run.directive is Action.CONTINUE:
            run.directive, run.directive_reason = Action.CHECKPOINT, finding.reason
            run.directive_message = f"{message}: checkpoint now."
        elif run.directive is Action.CONTINUE:
            run.directive_reason, run.directive_message = finding.reason, message
        events.record(
            session,
            now,
            Severity.WARNING if finding.action is Response.WARN else Severity.CRITICAL,
            Category.MODEL,
            f"run:{run.id}",
            message if finding.action is Response.STOP else f"{message}.",
            budget_id=run.budget_id,
            evidence={**finding.evidence, "action": finding.action.value},
        )
    return stop


def _stop_message(run: RunRow, finding: HealthFinding) -> str:
    if finding.rule.kind is not Kind.NON_FINITE:
        return f"{finding.message}: save now, the pod will be stopped."
    last = (
        f"the last good checkpoint is step {run.checkpoint_step}, {run.checkpoint_path}"
        if run.checkpoint_path
        else "the job has named no checkpoint"
    )
    return (
        f"{finding.message}. Do not save (the weights may not be finite): the pod will be "
        f"stopped, keeping its workspace; {last}."
    )
