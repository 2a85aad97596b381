"""Rows read as plain records: what is set on them is written back, and nothing else."""

from __future__ import annotations

from sqlalchemy import bindparam, event, select
from sqlalchemy.orm import Session

from governor.db import records
from governor.db import repository as repo
from governor.db.heartbeats import update_runs
from governor.db.tables import RunRow
from governor.domain.model import Action, Reason
from governor.scheduler import tasks
from tests.integration.conftest import Governor, counted

WRITES = ("INSERT", "UPDATE", "DELETE")
RUN = select(RunRow.__table__).where(RunRow.__table__.c.id.in_(bindparam("ids", expanding=True)))


def test_only_what_was_set_is_written_and_a_held_row_sees_it(gov: Governor) -> None:
    budget = gov.budget()
    pod = gov.pod(budget)
    first, second = gov.run(budget, pod), gov.run(budget, pod)
    with gov.session() as s:
        held = repo.get_run(s, first)  # the caller's ORM object of the same row
        loaded = {r.id: r for r in records.load(s, RUN, {"ids": [first, second]}, records.Record)}
        one, two = loaded[first], loaded[second]
        one.directive, one.directive_reason = Action.STOP, Reason.MANUAL
        two.stall_alerted = True
        # written by someone else after the read
        update_runs(s.connection(), [(first, {"step": 7})])
        records.write_back(s, RunRow, [one, two])
        assert held.directive is Action.STOP
        assert one.changed == two.changed == {}
    with gov.session() as s:
        first_row, second_row = repo.get_run(s, first), repo.get_run(s, second)
        assert (first_row.directive, first_row.directive_reason) == (Action.STOP, Reason.MANUAL)
        assert first_row.step == 7, "a column the record did not set was overwritten"
        assert (second_row.stall_alerted, second_row.directive) == (True, Action.CONTINUE)


def test_a_quiet_enforcement_pass_builds_no_orm_object_and_writes_only_the_figures(
    gov: Governor,
) -> None:
    budget = gov.budget("1000000")
    for n in range(20):
        gov.run(budget, gov.pod(budget, ref=f"pod-{n}"))
    gov.tick()
    loaded: list[object] = []

    def note(_session: Session, instance: object) -> None:
        loaded.append(instance)

    event.listen(Session, "loaded_as_persistent", note)
    try:
        with counted(gov) as statements:
            tasks.enforce(gov.ctx)
    finally:
        event.remove(Session, "loaded_as_persistent", note)
    assert loaded == [], "the pass read rows as ORM objects"
    writes = [s for s in statements if s.split(None, 1)[0].upper() in WRITES]
    assert len(writes) == 1, writes  # one statement for every budget's figures
    assert writes[0].startswith("UPDATE budgets SET") and "figures_spent_usd" in writes[0]
