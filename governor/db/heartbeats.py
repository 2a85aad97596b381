"""The heartbeat's hot path in storage: what a plain beat reads and writes, and how its writes
are committed.

A plain beat reads its run's facts with the figures the latest enforcement pass kept on its
budget, as a `PlainRun` (one read for up to 256 runs, which builds no statement and no ORM
object: `Lean`), then writes the run's own columns, its metric points and the phase it
entered (`PlainWrite`), committed together with the other plain beats' writes that queued
meanwhile (`GroupCommit`, one for each database this process writes to). Deciding is not
done here: see `governor.services.jobs.checkins`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import cache
from typing import Any, NamedTuple
from weakref import WeakKeyDictionary

from sqlalchemy import Connection, Engine, bindparam, insert, select

from governor.db import bulk
from governor.db.engine import reading, without_flush_wait
from governor.db.group_commit import GroupCommit
from governor.db.lean import Lean
from governor.db.tables import BudgetRow, RunMetricRow, RunPhaseRow, RunRow
from governor.domain.model import Action, Phase, Reason, RunStatus


class PlainRun(NamedTuple):
    """What a plain beat reads of its run: what tells a plain beat from another, what its
    health rules judge and what it answers with; then the figures kept on its budget."""

    id: str
    status: RunStatus
    ended_at: datetime | None
    step: int
    phase: Phase | None
    pace_at: datetime | None
    heartbeat_timeout_s: float
    directive: Action
    directive_reason: Reason | None
    directive_message: str | None
    health_rules: list[dict[str, Any]] | None
    health_state: dict[str, Any] | None
    figures_at: datetime | None
    figures_spent_usd: Decimal | None
    figures_shutdown_usd: Decimal | None
    figures_storage_tail_usd: Decimal | None
    reserve_usd: Decimal
    figures_ceiling_usd: Decimal | None
    figures_burn_usd_per_hour: Decimal | None


# A group's runs are read by a statement for the next of these sizes of group (its ids
# padded with its first), so that each size is compiled once; a larger group in several.
READ_SIZES = (1, 4, 16, 64, 256)


@cache
def _read(size: int) -> Lean:
    runs, budgets = RunRow.__table__.c, BudgetRow.__table__.c
    columns = [runs[name] if name in runs else budgets[name] for name in PlainRun._fields]
    return Lean(
        select(*columns)
        .join_from(RunRow.__table__, BudgetRow.__table__, RunRow.budget_id == BudgetRow.id)
        .where(RunRow.id.in_([bindparam(f"run_{n}") for n in range(size)])),
        row=PlainRun,
    )


def read_plain_runs(engine: Engine, run_ids: Collection[str]) -> dict[str, PlainRun]:
    """These runs, by id (a run that does not exist is missing), read outside a transaction:
    one statement for up to 256 runs."""
    ids: list[str] = list(run_ids)
    found: dict[str, PlainRun] = {}
    with reading(engine) as connection:
        for start in range(0, len(ids), READ_SIZES[-1]):
            some = ids[start : start + READ_SIZES[-1]]
            size = next(size for size in READ_SIZES if size >= len(some))
            padded = some + some[:1] * (size - len(some))
            rows = _read(size).execute(
                connection, {f"run_{n}": run_id for n, run_id in enumerate(padded)}
            )
            found.update((row.id, row) for row in rows)
    return found


@dataclass(frozen=True)
class PlainWrite:
    run_id: str
    changes: dict[str, Any]  # the run's own columns
    points: list[dict[str, Any]]  # its metrics' rows
    phases: list[dict[str, Any]]  # the phase it entered, as a row of its history


def update_runs(connection: Connection, changes: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Set these columns of these runs: one write per set of columns (`bulk`), its runs in
    the order of their ids."""
    by_columns: dict[frozenset[str], list[dict[str, Any]]] = {}
    for run_id, changed in sorted(changes, key=lambda change: change[0]):
        by_columns.setdefault(frozenset(changed), []).append({"id": run_id, **changed})
    for rows in by_columns.values():
        bulk.update_rows(connection, RunRow.__table__, rows)


# built once, for the heartbeat's hot path; inline: their new ids are not read back
_POINTS = Lean(insert(RunMetricRow.__table__).inline())
_PHASES = Lean(insert(RunPhaseRow.__table__).inline())


def insert_points(connection: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Insert these metric points, of any runs, in one statement."""
    if rows:
        _POINTS.execute(connection, rows)


def _write_plain(connection: Connection, writes: Sequence[PlainWrite]) -> None:
    without_flush_wait(connection)  # a beat lost with the database server is sent again
    update_runs(connection, [(write.run_id, write.changes) for write in writes])
    insert_points(connection, [p for write in writes for p in write.points])
    phases = [phase for write in writes for phase in write.phases]
    if phases:
        _PHASES.execute(connection, phases)


# One group of plain beats' writes per database the process writes to.
_groups: WeakKeyDictionary[Engine, GroupCommit[PlainWrite]] = WeakKeyDictionary()


def commit_plain(engine: Engine, writes: Sequence[PlainWrite]) -> list[BaseException | None]:
    """Commit these writes, with any others that queue meanwhile; for each, what stopped it
    (None: committed). See `GroupCommit.commit_all`."""
    group = _groups.get(engine)
    if group is None:
        group = _groups.setdefault(engine, GroupCommit(engine, _write_plain))
    return group.commit_all(writes)
