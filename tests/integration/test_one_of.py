"""A list of ids bound as one parameter: the rows named, on both databases, and on PostgreSQL
the same statement however many ids the list holds."""

from __future__ import annotations

from sqlalchemy import select, update

from governor.db.one_of import one_of
from governor.db.tables import BudgetRow
from governor.scheduler import tasks
from tests.integration.conftest import Governor, counted

BY_ID = select(BudgetRow.id).where(one_of(BudgetRow.id, "ids")).order_by(BudgetRow.id)


def test_the_rows_named_and_no_other(gov: Governor) -> None:
    first, second, third = gov.budget(), gov.budget(), gov.budget()
    with gov.session() as s:
        assert s.scalars(BY_ID, {"ids": [third, first, "nope"]}).all() == sorted([first, third])
        assert s.scalars(BY_ID, {"ids": [second]}).all() == [second]
        assert s.scalars(BY_ID, {"ids": []}).all() == []


def test_a_longer_value_than_the_column_holds_is_not_cut_short_to_match(gov: Governor) -> None:
    budget = gov.budget()
    longest = "n" * 200  # what budgets.name holds at most
    by_name = select(BudgetRow.id).where(one_of(BudgetRow.name, "names"))
    with gov.session() as s:
        s.execute(update(BudgetRow).where(BudgetRow.id == budget).values(name=longest))
        assert s.scalars(by_name, {"names": [longest + "more"]}).all() == []
        assert s.scalars(by_name, {"names": [longest]}).all() == [budget]


def test_an_enforcement_pass_reads_one_budget_or_three_with_the_same_statements(
    gov: Governor,
) -> None:
    def reads() -> list[str]:
        with counted(gov) as statements:
            tasks.enforce(gov.ctx)
        return [s for s in statements if s.lstrip().upper().startswith("SELECT")]

    budget = gov.budget("1000")
    gov.run(budget, gov.pod(budget))
    one = reads()
    for n in range(2):
        other = gov.budget("1000")
        gov.run(other, gov.pod(other, ref=f"pod-{n + 2}"))
    three = reads()
    assert len(one) == len(three)
    if gov.ctx.engine.dialect.name == "postgresql":
        # the ids go as one array: the driver and the server see a statement they know
        assert one == three
