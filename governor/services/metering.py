"""The meter: append what each pod has cost since it was last charged, then move the mark."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import LedgerEntryRow, PodRow
from governor.domain.ledger import accrue
from governor.domain.model import EntryKind
from governor.services.book import meter


def accrue_pod(session: Session, pod: PodRow, now: datetime) -> None:
    """Charge `pod` up to `now` at its current rates. Entries and the mark move together."""
    for charge in accrue(meter(pod), now):
        session.add(
            LedgerEntryRow(
                budget_id=pod.budget_id,
                pod_id=pod.id,
                kind=EntryKind.ACCRUAL,
                charge=charge.kind,
                amount_usd=charge.amount,
                period_start=charge.start,
                period_end=charge.end,
                created_at=now,
            )
        )
    pod.accrued_until = max(pod.accrued_until, now)


def accrue_budget(session: Session, budget_id: str, now: datetime) -> None:
    repo.get_budget(session, budget_id, lock=True)
    for pod in repo.pods_of(session, budget_id):
        accrue_pod(session, pod, now)
