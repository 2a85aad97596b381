"""The meter: what each pod has cost, written to the ledger one UTC hour at a time.

Spend is always the ledger plus what each pod has cost since it was last accrued, so the
ledger need not move every few seconds to be exact: an entry is written when an hour ends
(the `accrue` passes) and whenever a pod's rates are about to change (a stop, a resume, its
storage released), and the running totals on the pod and its budget move with every entry.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from governor.db import bulk
from governor.db import repository as repo
from governor.db.one_of import one_of
from governor.db.tables import BudgetRow, LedgerEntryRow, PodRow
from governor.domain.ledger import accrue, slice_start
from governor.domain.model import ChargeKind, EntryKind, PodState
from governor.domain.money import ZERO
from governor.services.context import ServiceContext, batches, first_pods
from governor.services.money.book import meter

# The hour's ledger is written over as many accrue passes as it takes at this many pods a pass
# (whole budgets), so that no pass grows with the fleet: 10,000 pods close their hour within
# five passes. Spend is exact meanwhile: it is always the ledger plus what each pod has cost
# since its last entry.
ACCRUE_PODS_PER_PASS = 2_000


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


def due_budgets(session: Session, until: datetime) -> Sequence[tuple[str, int]]:
    """The budgets with a pod not charged up to `until` that may still cost money, each with
    how many such pods it has."""
    return repo.pods_by_budget(session, PodRow.state != PodState.GONE, PodRow.accrued_until < until)


_PODS, _BUDGETS, _LEDGER = PodRow.__table__, BudgetRow.__table__, LedgerEntryRow.__table__
_DUE_PODS = select(_PODS).where(
    one_of(_PODS.c.budget_id, "budget_ids"),
    _PODS.c.state != PodState.GONE,
    _PODS.c.accrued_until < bindparam("until"),
)


def accrue_budgets(session: Session, budget_ids: Sequence[str], until: datetime) -> int:
    """Charge every pod of these budgets up to `until`; returns how many pods were charged.

    Three writes whatever the number of pods (`bulk`): their entries inserted together, the
    pods' marks and totals moved together, the budgets' totals moved together. The pods are
    read as plain rows, the budgets locked first (as every writer of a budget's ledger does)."""
    repo.lock_budgets(session, budget_ids)
    connection = session.connection()
    due = connection.execute(_DUE_PODS, {"budget_ids": list(budget_ids), "until": until}).all()
    entries, pod_moves, budget_moves = [], [], defaultdict[str, Decimal](Decimal)
    for pod in due:
        charges = accrue(meter(pod), until)
        for charge in charges:
            entries.append(
                {
                    "budget_id": pod.budget_id,
                    "pod_id": pod.id,
                    "kind": EntryKind.ACCRUAL,
                    "charge": charge.kind,
                    "amount_usd": charge.amount,
                    "period_start": charge.start,
                    "period_end": charge.end,
                    "note": None,
                    "created_at": until,
                }
            )
        added = sum((charge.amount for charge in charges), ZERO)
        pod_moves.append(
            {"id": pod.id, "recorded_usd": added, "accrued_until": max(pod.accrued_until, until)}
        )
        budget_moves[pod.budget_id] += added
    bulk.insert_rows(connection, _LEDGER, entries)
    bulk.update_rows(connection, _PODS, pod_moves, adding={"recorded_usd"})
    budget_rows = [{"id": b, "recorded_usd": a} for b, a in budget_moves.items()]
    bulk.update_rows(connection, _BUDGETS, budget_rows, adding={"recorded_usd"})
    return len(due)


def accrue_due(ctx: ServiceContext) -> None:
    """Write every hour that has ended to the ledger, for each pod that may still cost money:
    up to ACCRUE_PODS_PER_PASS pods a pass, the rest at the passes after."""
    until = slice_start(ctx.clock.now())
    with ctx.read_only() as session:
        due = due_budgets(session, until)
    for batch in batches(first_pods(due, ACCRUE_PODS_PER_PASS), ctx.pods_per_transaction):
        with ctx.unit_of_work() as session:
            accrue_budgets(session, batch, until)
