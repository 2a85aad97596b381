"""Extensions: pending changes nothing, an approval raises the ceiling once, decided once."""

from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pytest

from governor.domain.errors import Conflict
from governor.domain.model import Action, BudgetState, ExtensionState, Reason, Requester
from governor.services.money import extensions
from tests.integration.conftest import BY, Governor

D = Decimal


def request(gov: Governor, budget: str, amount: str = "10", by: Requester = Requester.JOB) -> str:
    with gov.session() as s:
        return extensions.request(s, budget, D(amount), "more steps", by, gov.clock.now()).id


def decide(gov: Governor, extension_id: str, approve: bool = True) -> ExtensionState:
    with gov.session() as s:
        return extensions.decide(
            s, gov.ctx.config, extension_id, approve, None, gov.clock.now(), by=BY
        ).state


def test_a_pending_request_changes_nothing_and_delays_no_stop(gov: Governor) -> None:
    budget = gov.budget(ceiling="1.00")
    pod = gov.pod(budget)
    run = gov.run(budget, pod, grace_s=0, timeout_s=3600)
    request(gov, budget, "100")
    assert gov.book(budget).figures.effective_ceiling == D("1.00")
    gov.tick(1000)
    assert (gov.beat(run).action, gov.beat(run).reason) == (Action.STOP, Reason.CEILING)


def test_approval_raises_the_effective_ceiling_and_reopens_the_budget(gov: Governor) -> None:
    budget = gov.budget(ceiling="1.00")
    gov.pod(budget)
    gov.tick(1000)  # ceiling reached: stopping
    assert gov.book(budget).budget.state is BudgetState.STOPPING
    ext = request(gov, budget, "5", Requester.OPERATOR)
    assert decide(gov, ext) is ExtensionState.APPROVED
    book = gov.book(budget)
    assert book.figures.effective_ceiling == D("6.00")
    assert book.budget.state is BudgetState.OPEN


def test_a_denial_leaves_the_ceiling(gov: Governor) -> None:
    budget = gov.budget(ceiling="1.00")
    ext = request(gov, budget)
    assert decide(gov, ext, approve=False) is ExtensionState.DENIED
    assert gov.book(budget).figures.effective_ceiling == D("1.00")


@pytest.mark.parametrize("second", [True, False], ids=["approve-again", "deny-after"])
def test_a_request_is_decided_once(gov: Governor, second: bool) -> None:
    budget = gov.budget()
    ext = request(gov, budget)
    decide(gov, ext)
    with pytest.raises(Conflict, match="already approved"):
        decide(gov, ext, approve=second)
    assert gov.book(budget).figures.effective_ceiling == D("110")


def test_twenty_concurrent_approvals_apply_once(gov: Governor) -> None:
    budget = gov.budget()
    ext = request(gov, budget, "7.50")

    def approve(_: int) -> str:
        try:
            return decide(gov, ext).value
        except Conflict:
            return "conflict"

    with ThreadPoolExecutor(max_workers=20) as pool:
        outcomes = list(pool.map(approve, range(20)))
    assert sorted(outcomes) == ["approved"] + ["conflict"] * 19
    assert gov.book(budget).figures.effective_ceiling == D("107.50")


def test_the_pass_counts_approved_extensions_alone(gov: Governor) -> None:
    """The enforcement pass reads what approved extensions add with its budgets: a pod that
    would pass the first ceiling runs on within the extended one, and the figures the pass
    keeps for heartbeats carry that ceiling, not a denied or pending extension's."""
    budget = gov.budget(ceiling="1.00")
    run = gov.run(budget, gov.pod(budget), grace_s=0, timeout_s=7200)
    for amount, approve in (("5", True), ("7", True), ("100", False)):
        decide(gov, request(gov, budget, amount, Requester.OPERATOR), approve)
    request(gov, budget, "1000", Requester.OPERATOR)  # pending
    for step in range(1, 7):  # half an hour of progress: past the first ceiling
        gov.beat(run, step=step)
        gov.tick(300)
    answer = gov.beat(run, step=7)
    assert answer.action is Action.CONTINUE
    assert answer.budget.spent > D("1.00")
    assert answer.budget.effective_ceiling == D("13.00")
