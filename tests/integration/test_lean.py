"""Statements run on the driver's cursor (`Lean`): what they read and write is what
SQLAlchemy's own execution of the same statement reads and writes, on both databases; the
engine's listeners see them; a driver's error comes out as SQLAlchemy's."""

from __future__ import annotations

from decimal import Decimal

import pytest
from sqlalchemy import Connection, Select, bindparam, exc, insert, select

from governor.db import repository as repo
from governor.db.engine import reading, writing
from governor.db.heartbeats import PlainRun, insert_points, read_plain_runs, update_runs
from governor.db.lean import Lean
from governor.db.tables import BudgetRow, RunMetricRow, RunRow
from governor.domain.model import Action, RunStatus
from governor.services.money.book import KEPT_FIGURES
from governor.services.monitoring import metric_history
from tests.integration.conftest import Governor, counted

# Of every kind a heartbeat reads: text, enums, aware UTC times, floats, JSON, micro-dollars.
RUN_COLUMNS = (
    "id",
    "status",
    "directive",
    "directive_reason",
    "last_heartbeat_at",
    "ended_at",
    "heartbeat_timeout_s",
    "health_rules",
    "health_state",
    "metrics",
)


def runs(gov: Governor, count: int) -> list[str]:
    budget = gov.budget("1000")
    made = [gov.run(budget, gov.pod(budget, ref=f"pod-{n}")) for n in range(count)]
    gov.tick()  # the pass keeps the budget's figures (micro-dollars, a time)
    for step, run in enumerate(made, start=2):
        gov.beat(run, step=step, metrics={"loss": 0.5 + step, "lr": 1e-4})
    return made


def columns(run_columns: tuple[str, ...], budget_columns: tuple[str, ...]) -> list:
    return [RunRow.__table__.c[name] for name in run_columns] + [
        BudgetRow.__table__.c[name] for name in budget_columns
    ]


def with_budget(selected: list) -> Select:
    return select(*selected).join_from(
        RunRow.__table__, BudgetRow.__table__, RunRow.budget_id == BudgetRow.id
    )


def as_sqlalchemy_reads(
    gov: Governor,
    run_ids: list[str],
    run_columns: tuple[str, ...] = RUN_COLUMNS,
    budget_columns: tuple[str, ...] = KEPT_FIGURES,
) -> dict[str, tuple]:
    """The same columns, read by SQLAlchemy's own execution."""
    statement = with_budget(columns(run_columns, budget_columns)).where(RunRow.id.in_(run_ids))
    with gov.ctx.engine.connect() as connection:
        return {row.id: tuple(row) for row in connection.execute(statement)}


def lean_reads(connection: Connection, run_ids: list[str]) -> dict[str, tuple]:
    """RUN_COLUMNS and KEPT_FIGURES of these runs, read by a Lean statement."""
    ids = [bindparam(f"run_{n}") for n in range(len(run_ids))]
    read = Lean(with_budget(columns(RUN_COLUMNS, KEPT_FIGURES)).where(RunRow.id.in_(ids)))
    rows = read.execute(connection, {f"run_{n}": run_id for n, run_id in enumerate(run_ids)})
    return {row.id: row for row in rows}


@pytest.mark.parametrize("count", [1, 3, 300])
def test_a_lean_read_reads_what_sqlalchemy_reads(gov: Governor, count: int) -> None:
    run_ids = runs(gov, count)
    asked = [*run_ids, "run_missing"]
    with reading(gov.ctx.engine) as connection:
        lean = lean_reads(connection, asked)
    assert {run_id: tuple(row) for run_id, row in lean.items()} == as_sqlalchemy_reads(gov, run_ids)
    first = lean[run_ids[0]]
    assert first.status is RunStatus.RUNNING and first.directive is Action.CONTINUE
    assert first.last_heartbeat_at.utcoffset().total_seconds() == 0
    assert isinstance(first.figures_spent_usd, Decimal)
    assert first.metrics == {"loss": 2.5, "lr": 1e-4}


@pytest.mark.parametrize("count", [1, 3, 300])
def test_a_plain_beats_read_is_its_typed_record_of_what_sqlalchemy_reads(
    gov: Governor, count: int
) -> None:
    run_ids = runs(gov, count)
    found = read_plain_runs(gov.ctx.engine, [*run_ids, "run_missing"])
    run_fields = PlainRun._fields[: -len(KEPT_FIGURES)]
    assert PlainRun._fields[len(run_fields) :] == KEPT_FIGURES
    expected = as_sqlalchemy_reads(gov, run_ids, run_fields, KEPT_FIGURES)
    assert {run_id: tuple(row) for run_id, row in found.items()} == expected
    assert all(isinstance(row, PlainRun) for row in found.values())
    first = found[run_ids[0]]
    assert first.status is RunStatus.RUNNING and first.directive is Action.CONTINUE
    assert first.figures_at is not None and first.figures_at.utcoffset().total_seconds() == 0
    assert isinstance(first.figures_shutdown_usd, Decimal)
    assert isinstance(first.figures_storage_tail_usd, Decimal)


def test_a_lean_write_lands_as_sqlalchemy_would_write_it(gov: Governor) -> None:
    [run] = runs(gov, 1)
    at = gov.clock.now()
    points = metric_history.points(run, 7, {"loss": 0.25, "accuracy": 0.75}, at)
    with writing(gov.ctx.engine) as connection:
        update_runs(connection, [(run, {"step": 7, "last_heartbeat_at": at})])
        insert_points(connection, points)
    with gov.session() as s:
        row = repo.get_run(s, run)
        assert (row.step, row.last_heartbeat_at) == (7, at)
        stored = s.execute(
            select(RunMetricRow.name, RunMetricRow.value, RunMetricRow.at)
            .where(RunMetricRow.run_id == run, RunMetricRow.step == 7)
            .order_by(RunMetricRow.name)
        ).all()
    assert [tuple(p) for p in stored] == [("accuracy", 0.75, at), ("loss", 0.25, at)]


def test_the_engines_listeners_see_every_lean_statement(gov: Governor) -> None:
    [run] = runs(gov, 1)
    with counted(gov) as statements, reading(gov.ctx.engine) as connection:
        lean_reads(connection, [run])
    assert len(statements) == 1 and statements[0].lstrip().startswith("SELECT"), statements


def test_a_driver_error_is_sqlalchemys_and_the_write_is_not_half_done(gov: Governor) -> None:
    [run] = runs(gov, 1)
    at = gov.clock.now()
    points = metric_history.points(run, 9, {"loss": 1.0}, at)
    points += metric_history.points("run_missing", 9, {"loss": 1.0}, at)  # no such run
    with pytest.raises(exc.IntegrityError), writing(gov.ctx.engine) as connection:
        update_runs(connection, [(run, {"step": 9})])
        insert_points(connection, points)
    with gov.session() as s:
        assert repo.get_run(s, run).step != 9
        assert s.scalars(select(RunMetricRow.id).where(RunMetricRow.step == 9)).all() == []


def test_a_statement_that_needs_more_than_its_parameters_is_refused(gov: Governor) -> None:
    spread = select(RunRow.id).where(RunRow.id.in_(bindparam("ids", expanding=True)))
    filled_in = insert(RunRow.__table__)  # the columns left out have defaults to fill in
    with reading(gov.ctx.engine) as connection:
        with pytest.raises(ValueError, match="not a statement to run lean"):
            Lean(spread).execute(connection, {"ids": ["run_1"]})
        with pytest.raises(ValueError, match="not a statement to run lean"):
            Lean(filled_in).execute(connection, {"id": "run_new"})
