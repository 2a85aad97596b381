"""Queries and writes over the tables. Never commits: the unit of work does."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from governor.db.tables import (
    BudgetRow,
    EventRow,
    ExtensionRow,
    GpuPeakRow,
    LedgerEntryRow,
    PlanCheckRow,
    PodRow,
    RunRow,
    StopOrderRow,
    TokenRow,
)
from governor.domain.errors import NotFound
from governor.domain.model import Category, EntryKind, ExtensionState, PodState, Role, Severity
from governor.domain.money import ZERO
from governor.domain.stop_order import ACTIVE_STATES


def get_budget(
    session: Session, budget_id: str, *, lock: bool = False, share: bool = False
) -> BudgetRow:
    """The budget. With `lock`, held for update until the transaction ends; with `share`,
    held against writers only, so several reads of its pods and ledger agree with each other.

    Every writer of a budget's ledger takes `lock` first: that is what makes `share` enough.
    (SQLite takes its write lock at BEGIN and needs neither.)
    """
    query = select(BudgetRow).where(BudgetRow.id == budget_id)
    if lock:
        query = query.with_for_update(key_share=True)
    elif share:
        query = query.with_for_update(read=True)
    row = session.scalars(query).one_or_none()
    if row is None:
        raise NotFound(f"no budget {budget_id!r}")
    return row


def list_budgets(session: Session) -> Sequence[BudgetRow]:
    return session.scalars(select(BudgetRow).order_by(BudgetRow.created_at)).all()


def budget_ids(session: Session) -> Sequence[str]:
    return session.scalars(select(BudgetRow.id).order_by(BudgetRow.created_at)).all()


def _get(session: Session, model: type, key: str, what: str):  # type: ignore[no-untyped-def]
    row = session.get(model, key)
    if row is None:
        raise NotFound(f"no {what} {key!r}")
    return row


def get_pod(session: Session, pod_id: str) -> PodRow:
    row: PodRow = _get(session, PodRow, pod_id, "pod")
    return row


def get_run(session: Session, run_id: str) -> RunRow:
    row: RunRow = _get(session, RunRow, run_id, "run")
    return row


def get_extension(session: Session, extension_id: str) -> ExtensionRow:
    row: ExtensionRow = _get(session, ExtensionRow, extension_id, "extension")
    return row


def pod_by_ref(session: Session, provider: str, ref: str) -> PodRow | None:
    return session.scalars(
        select(PodRow).where(PodRow.provider == provider, PodRow.provider_ref == ref)
    ).one_or_none()


def pods_of(session: Session, budget_id: str) -> Sequence[PodRow]:
    return session.scalars(
        select(PodRow).where(PodRow.budget_id == budget_id).order_by(PodRow.created_at)
    ).all()


def pods_not_gone(session: Session) -> Sequence[PodRow]:
    """Every pod that may still be billed: running, stopping or stopped with its storage."""
    return session.scalars(
        select(PodRow).where(PodRow.state != PodState.GONE).order_by(PodRow.created_at)
    ).all()


def pod_entries(
    session: Session, pod_id: str, kind: EntryKind, start: datetime, end: datetime
) -> Sequence[LedgerEntryRow]:
    """A pod's ledger entries of one kind whose period overlaps [start, end]."""
    return session.scalars(
        select(LedgerEntryRow).where(
            LedgerEntryRow.pod_id == pod_id,
            LedgerEntryRow.kind == kind,
            LedgerEntryRow.period_end > start,
            LedgerEntryRow.period_start < end,
        )
    ).all()


def pod_total(session: Session, pod_id: str, kind: EntryKind) -> Decimal:
    total = session.scalar(
        select(func.sum(LedgerEntryRow.amount_usd)).where(
            LedgerEntryRow.pod_id == pod_id, LedgerEntryRow.kind == kind
        )
    )
    return total or ZERO


def runs_of(session: Session, budget_id: str) -> Sequence[RunRow]:
    return session.scalars(
        select(RunRow).where(RunRow.budget_id == budget_id).order_by(RunRow.created_at)
    ).all()


def active_stop_orders(session: Session, budget_id: str | None = None) -> Sequence[StopOrderRow]:
    query = select(StopOrderRow).where(StopOrderRow.state.in_(ACTIVE_STATES))
    if budget_id is not None:
        query = query.where(StopOrderRow.budget_id == budget_id)
    return session.scalars(query.order_by(StopOrderRow.created_at)).all()


def latest_stop_order(session: Session, pod_id: str) -> StopOrderRow | None:
    return session.scalars(
        select(StopOrderRow)
        .where(StopOrderRow.pod_id == pod_id)
        .order_by(StopOrderRow.created_at.desc())
        .limit(1)
    ).first()


def get_stop_order(session: Session, order_id: str) -> StopOrderRow:
    row: StopOrderRow = _get(session, StopOrderRow, order_id, "stop order")
    return row


def recorded_by_pod(session: Session, budget_id: str) -> dict[str, Decimal]:
    """The ledger's total per pod of a budget."""
    rows = session.execute(
        select(LedgerEntryRow.pod_id, func.sum(LedgerEntryRow.amount_usd))
        .where(LedgerEntryRow.budget_id == budget_id)
        .group_by(LedgerEntryRow.pod_id)
    ).all()
    return {pod_id: total or ZERO for pod_id, total in rows}


def approved_extensions_total(session: Session, budget_id: str) -> Decimal:
    total = session.scalar(
        select(func.sum(ExtensionRow.amount_usd)).where(
            ExtensionRow.budget_id == budget_id,
            ExtensionRow.state == ExtensionState.APPROVED,
        )
    )
    return total or ZERO


def extensions(
    session: Session, *, budget_id: str | None = None, state: ExtensionState | None = None
) -> Sequence[ExtensionRow]:
    query = select(ExtensionRow).order_by(ExtensionRow.created_at)
    if budget_id is not None:
        query = query.where(ExtensionRow.budget_id == budget_id)
    if state is not None:
        query = query.where(ExtensionRow.state == state)
    return session.scalars(query).all()


def decide_extension(
    session: Session,
    extension_id: str,
    state: ExtensionState,
    now: datetime,
    note: str | None,
) -> bool:
    """Move a pending extension to `state`. False if it was no longer pending (lost the race)."""
    result = session.execute(
        update(ExtensionRow)
        .where(ExtensionRow.id == extension_id, ExtensionRow.state == ExtensionState.PENDING)
        .values(state=state, decided_at=now, decision_note=note)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1  # type: ignore[attr-defined]


def token_by_hash(session: Session, token_hash: str) -> TokenRow | None:
    return session.scalars(select(TokenRow).where(TokenRow.token_hash == token_hash)).one_or_none()


def has_operator_token(session: Session) -> bool:
    count = session.scalar(select(func.count()).where(TokenRow.role == Role.OPERATOR))
    return bool(count)


def events(
    session: Session,
    *,
    budget_id: str | None = None,
    severity: Severity | None = None,
    category: Category | None = None,
    subject: str | None = None,
    since: datetime | None = None,
    limit: int = 100,
) -> Sequence[EventRow]:
    query = select(EventRow)
    if budget_id is not None:
        query = query.where(EventRow.budget_id == budget_id)
    if severity is not None:
        query = query.where(EventRow.severity == severity)
    if category is not None:
        query = query.where(EventRow.category == category)
    if subject is not None:
        query = query.where(EventRow.subject == subject)
    if since is not None:
        query = query.where(EventRow.at >= since)
    return session.scalars(query.order_by(EventRow.id.desc()).limit(limit)).all()


def runs_on_pod(session: Session, pod_id: str) -> Sequence[RunRow]:
    return session.scalars(
        select(RunRow).where(RunRow.pod_id == pod_id).order_by(RunRow.created_at)
    ).all()


def peaks_of(session: Session, run_ids: Sequence[str]) -> Sequence[GpuPeakRow]:
    if not run_ids:
        return []
    return session.scalars(
        select(GpuPeakRow).where(GpuPeakRow.run_id.in_(run_ids)).order_by(GpuPeakRow.gpu_uuid)
    ).all()


def local_pods(session: Session) -> Sequence[PodRow]:
    """Pods whose GPUs this server samples itself, while they may still be running."""
    return session.scalars(
        select(PodRow).where(
            PodRow.local.is_(True), PodRow.state.in_((PodState.RUNNING, PodState.STOPPING))
        )
    ).all()


def plan_checks_of(session: Session, budget_id: str) -> Sequence[PlanCheckRow]:
    """A budget's preflight verdicts, oldest first."""
    return session.scalars(
        select(PlanCheckRow)
        .where(PlanCheckRow.budget_id == budget_id)
        .order_by(PlanCheckRow.created_at, PlanCheckRow.id)
    ).all()
