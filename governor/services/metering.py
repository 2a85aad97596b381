"""The meter: what each pod has cost, written to the ledger one UTC hour at a time.

Spend is always the ledger plus what each pod has cost since it was last accrued, so the
ledger need not move every few seconds to be exact: an entry is written when an hour ends
(the `accrue` pass) and whenever a pod's rates are about to change (a stop, a bill), and the
running totals on the pod and its budget move with every entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal

from sqlalchemy import select
from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import BudgetRow, LedgerEntryRow, PodRow
from governor.domain.ledger import accrue
from governor.domain.model import ChargeKind, EntryKind, PodState
from governor.services.book import meter


def post(
    session: Session,
    pod: PodRow,
    kind: EntryKind,
    charge: ChargeKind,
    amount: Decimal,
    period: tuple[datetime, datetime],
    now: datetime,
    note: str | None = None,
) -> None:
    """Write one ledger entry and move the pod's and the budget's totals with it.

    The caller holds the budget's lock (every writer of a budget's ledger does).
    """
    budget = session.get(BudgetRow, pod.budget_id)
    assert budget is not None, pod.budget_id
    session.add(
        LedgerEntryRow(
            budget_id=pod.budget_id,
            pod_id=pod.id,
            kind=kind,
            charge=charge,
            amount_usd=amount,
            period_start=period[0],
            period_end=period[1],
            note=note,
            created_at=now,
        )
    )
    pod.recorded_usd += amount
    budget.recorded_usd += amount


def accrue_pod(session: Session, pod: PodRow, until: datetime) -> None:
    """Charge `pod` up to `until` at its current rates. Entries and the mark move together."""
    for charge in accrue(meter(pod), until):
        post(
            session,
            pod,
            EntryKind.ACCRUAL,
            charge.kind,
            charge.amount,
            (charge.start, charge.end),
            until,
        )
    pod.accrued_until = max(pod.accrued_until, until)


def due_budget_ids(session: Session, until: datetime) -> Sequence[str]:
    """The budgets with a pod not charged up to `until` that may still cost money."""
    return session.scalars(
        select(PodRow.budget_id)
        .where(PodRow.state != PodState.GONE, PodRow.accrued_until < until)
        .distinct()
        .order_by(PodRow.budget_id)
    ).all()


def accrue_budgets(session: Session, budget_ids: Sequence[str], until: datetime) -> int:
    """Charge every pod of these budgets up to `until`; returns how many pods were charged."""
    repo.budgets_by_id(session, budget_ids, lock=True)
    due = session.scalars(
        select(PodRow).where(
            PodRow.budget_id.in_(budget_ids),
            PodRow.state != PodState.GONE,
            PodRow.accrued_until < until,
        )
    ).all()
    for pod in due:
        accrue_pod(session, pod, until)
    return len(due)
