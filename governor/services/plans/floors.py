"""Measured floors read back for a plan's verdict: every peak per GPU and phase the runs of its
model and revision measured, with the configuration they ran (domain.preflight.measured). The
telemetry keeps them as peaks arrive (monitoring.telemetry); a job's out-of-memory report marks
its run."""

from __future__ import annotations

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import MeasuredFloorRow
from governor.domain.preflight.measured import Floor, FloorKey, floor_key
from governor.domain.preflight.plan import Plan
from governor.domain.telemetry import GIB


def of_model(session: Session, plan: Plan) -> list[Floor]:
    """The floors of the plan's model and revision; none for a plan without `model.id`."""
    key = floor_key(plan)
    if key is None:
        return []
    return [
        floor(row, oom)
        for row, oom in repo.floors_of_model(session, key.model_id, key.model_revision)
    ]


def floor(row: MeasuredFloorRow, oom: bool) -> Floor:
    key = FloorKey(row.model_id, row.model_revision, row.recipe, row.gpu_count)
    return Floor(
        key, row.gpu_name, row.run_id, row.phase, row.peak_used_bytes / GIB, row.at.date(), oom
    )
