"""The dashboard leads with danger: budgets most urgent first, each with what the governor will
do next and when, and the open problems of its runs, pods and GPUs raised to it."""

from __future__ import annotations

from decimal import Decimal

from governor.domain.model import BudgetState, Requester, Severity
from governor.services.money import extensions
from governor.services.view.dashboard_model import BudgetStatus
from tests.clock import FrozenClock
from tests.integration.conftest import Governor, gpu_sample, make_governor, read_dashboard


def by_id(budgets: tuple[BudgetStatus, ...]) -> dict[str, BudgetStatus]:
    return {b.id: b for b in budgets}


def test_the_budget_nearest_its_ceiling_comes_first_and_says_when_it_stops(gov: Governor) -> None:
    calm = gov.budget(ceiling="1000")
    gov.pod(calm, ref="calm-pod")
    idle = gov.budget(ceiling="50")  # nothing burns
    urgent = gov.budget(ceiling="1.00")  # $3.60/h: the ceiling is minutes away
    gov.pod(urgent, ref="h100-sft")
    spent = gov.budget(ceiling="0.50")
    gov.pod(spent, ref="done-pod")
    for _ in range(4):
        gov.tick(200)  # the small one reaches its ceiling and stops; the others burn on

    dash = read_dashboard(gov)
    assert [b.id for b in dash.budgets] == [urgent, calm, idle, spent]
    first = dash.budgets[0]
    assert first.seconds_to_ceiling is not None and 0 < first.seconds_to_ceiling < 3600
    assert (first.next_step.what, first.next_step.unless) == ("stops h100-sft", "unless extended")
    assert first.next_step.at == first.projected_exhaustion_at
    assert first.problems == ()
    budgets = by_id(dash.budgets)
    assert budgets[idle].next_step.what == "nothing: not burning"
    assert budgets[idle].seconds_to_ceiling is None and budgets[idle].next_step.at is None
    assert budgets[spent].state is BudgetState.EXHAUSTED
    # At its ceiling it says why (committed spend in its parts) and what would let it go on:
    # an extension that puts the ceiling above committed spend ($0.80 against $0.50).
    assert budgets[spent].committed == budgets[spent].spent + budgets[spent].storage_tail
    assert budgets[spent].next_step.what == (
        "the ceiling was reached at $0.80 committed (spent $0.80 + shutdown $0.00 + storage "
        "tail $0.00 + reserve $0.00): nothing runs"
    )
    assert budgets[spent].next_step.unless == "unless an extension of at least $0.31 is approved"


def test_a_ceiling_less_than_an_hour_away_is_never_shown_fine(gov: Governor) -> None:
    soon = gov.budget(ceiling="3.00")  # $3.60/h: its pod is stopped in under an hour
    gov.pod(soon, ref="soon-pod")
    later = gov.budget(ceiling="10.00")  # hours away
    gov.pod(later, ref="later-pod")
    gov.tick(60)

    dash = read_dashboard(gov)
    assert [b.id for b in dash.budgets] == [soon, later]
    first, second = dash.budgets
    assert first.seconds_to_ceiling is not None and first.seconds_to_ceiling < 3600
    assert first.committed_pct < 80 and first.problems == ()  # only the time says so
    assert first.attention is Severity.WARNING
    assert second.seconds_to_ceiling is not None and second.seconds_to_ceiling > 3600
    assert second.attention is None


def test_a_run_silent_past_its_timeout_is_a_critical_problem_of_its_budget(gov: Governor) -> None:
    soon = gov.budget(ceiling="1.00")
    gov.pod(soon, ref="soon-pod")
    quiet = gov.budget(ceiling="100000")
    pod = gov.pod(quiet, ref="quiet-pod")
    run = gov.run(quiet, pod, timeout_s=60)
    gov.beat(run, step=10)
    gov.clock.advance(61)  # read before a pass acts on it: what the page shows meanwhile

    dash = read_dashboard(gov)
    assert [b.id for b in dash.budgets] == [quiet, soon]  # how bad comes before how soon
    silent = dash.budgets[0]
    [problem] = silent.problems
    assert (problem.severity, problem.kind, problem.subject) == (
        Severity.CRITICAL,
        "heartbeat-lost",
        "job",
    )
    assert "60 s timeout" in problem.message
    assert silent.attention is Severity.CRITICAL  # its figures alone are far from the ceiling


def test_full_gpu_memory_and_a_pending_extension_keep_a_budget_from_looking_fine(
    gov: Governor,
) -> None:
    budget = gov.budget(ceiling="100000")
    pod = gov.pod(budget)
    gov.run(budget, pod)
    gov.report(pod, gpu_sample(95, 78, 0), gpu_sample(95, 40, 1))  # GPU 0: 78 of 80 GiB
    with gov.session() as s:
        extensions.request(
            s, budget, Decimal(750), "another epoch", Requester.OPERATOR, gov.clock.now()
        )

    [b] = read_dashboard(gov).budgets
    assert [(p.severity, p.kind, p.subject) for p in b.problems] == [
        (Severity.WARNING, "gpu-memory", "pod-1"),
        (Severity.WARNING, "extension-pending", "operator"),
    ]
    assert b.problems[0].message == "GPU memory nearly full: GPU 0 at 98%"
    assert b.problems[1].message == "extension of $750.00 awaits a decision: another epoch"
    assert b.attention is Severity.WARNING


def test_a_stop_the_provider_keeps_refusing_is_a_critical_problem(
    migrated_url: str, clock: FrozenClock
) -> None:
    gov = make_governor(migrated_url, clock, failures=100)
    try:
        budget = gov.budget(ceiling="1.00")
        gov.pod(budget, ref="h100-sft")
        gov.tick(1000)  # past the ceiling: a stop is ordered
        gov.tick(60)  # nobody to wait for: the provider is asked, and refuses
        [b] = read_dashboard(gov).budgets
    finally:
        gov.ctx.engine.dispose()
    assert b.next_step.what == "stopping h100-sft (ceiling); the job's save deadline"
    [problem] = b.problems
    assert (problem.severity, problem.kind, problem.subject) == (
        Severity.CRITICAL,
        "stop-failing",
        "h100-sft",
    )
    assert "simulated provider error (HTTP 503)" in problem.message
