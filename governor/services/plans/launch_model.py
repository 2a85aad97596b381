"""An accepted launch as it is read: its budget, price and reservation, and the figures it was
judged on."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import LaunchRow


@dataclass(frozen=True)
class Launch:
    id: str
    budget_id: str
    tool: str
    name: str | None
    user: str | None
    project: str | None
    plan_id: str | None
    price: Decimal = field(
        metadata={"doc": "its priced maximum: dearest candidate x nodes x hours"}
    )
    reserved: Decimal = field(metadata={"doc": "what it holds back (0 where its plan holds it)"})
    figures: dict[str, Any] = field(metadata={"doc": "the arithmetic and the figures used"})
    created_at: datetime
    expires_at: datetime = field(metadata={"doc": "its reservation is released then, pod or not"})
    released_at: datetime | None
    release_reason: str | None = field(metadata={"doc": "pod-appeared, withdrawn or expired"})
    claimed_at: datetime | None
    run_id: str | None


def launch(row: LaunchRow) -> Launch:
    return Launch(
        id=row.id,
        budget_id=row.budget_id,
        tool=row.tool,
        name=row.name,
        user=row.user,
        project=row.project,
        plan_id=row.plan_id,
        price=row.price_usd,
        reserved=row.reserved_usd,
        figures=row.figures,
        created_at=row.created_at,
        expires_at=row.expires_at,
        released_at=row.released_at,
        release_reason=row.release_reason,
        claimed_at=row.claimed_at,
        run_id=row.run_id,
    )


def get(session: Session, launch_id: str) -> Launch:
    return launch(repo.get_launch(session, launch_id))
