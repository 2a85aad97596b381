"""A stop order as it is read: what it is for, where it stands, what the job and the
provider answered."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from governor.db.tables import StopOrderRow
from governor.domain.model import Reason
from governor.domain.stop_order import StopState


@dataclass(frozen=True)
class StopOrder:
    id: str
    pod_id: str
    reason: Reason
    state: StopState
    deadline: datetime
    created_at: datetime
    notified_at: datetime | None
    acked_at: datetime | None
    ack_checkpoint: dict[str, Any] | None
    sent_at: datetime | None
    attempts: int
    confirmed_at: datetime | None
    last_error: str | None


def stop_order(row: StopOrderRow) -> StopOrder:
    return StopOrder(
        id=row.id,
        pod_id=row.pod_id,
        reason=row.reason,
        state=row.state,
        deadline=row.deadline,
        created_at=row.created_at,
        notified_at=row.notified_at,
        acked_at=row.acked_at,
        ack_checkpoint=row.ack_checkpoint,
        sent_at=row.sent_at,
        attempts=row.attempts,
        confirmed_at=row.confirmed_at,
        last_error=row.last_error,
    )
