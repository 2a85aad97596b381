"""The dashboard leads with danger: budgets most urgent first, each with what the governor will
do next and when, and the open problems of its runs, pods and GPUs raised to it."""

from __future__ import annotations

from decimal import Decimal

from fastapi.testclient import TestClient

from governor.db.tables import PodRow, RunRow
from governor.domain.model import BudgetState, PodState, Requester, RunStatus, Severity
from governor.services.money import extensions
from governor.services.runs import lifecycle
from governor.services.view.dashboard_model import BudgetStatus
from tests.clock import FrozenClock
from tests.integration.conftest import Governor, gpu_sample, make_governor, ok, read_dashboard


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
    # worst first: the exhausted one is red, the urgent one amber, the others fine
    assert [b.id for b in dash.budgets] == [spent, urgent, calm, idle]
    assert [b.attention for b in dash.budgets] == [Severity.CRITICAL, Severity.WARNING, None, None]
    first = dash.budgets[1]
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
    assert (problem.severity, problem.kind, problem.run, problem.pod) == (
        Severity.CRITICAL,
        "heartbeat-lost",
        "job",
        "quiet-pod",
    )
    assert problem.where == "job on quiet-pod"
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
    assert (b.problems[0].pod, b.problems[0].run) == ("pod-1", None)
    assert (b.problems[1].pod, b.problems[1].run) == (None, None)
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


def test_a_lost_job_stays_first_after_its_pod_stopped_until_an_operator_acknowledges_it(
    gov: Governor, client: TestClient
) -> None:
    calm = gov.budget(ceiling="100000")
    gov.pod(calm, ref="calm-pod")
    quiet = gov.budget(ceiling="100000")
    pod = gov.pod(quiet, ref="quiet-pod")
    run = gov.run(quiet, pod, timeout_s=60)
    gov.beat(run, step=10)
    gov.tick(61)  # silent past its timeout: its pod is ordered to stop
    gov.tick(1)  # the provider is asked: the fake cloud answers "pending" for 30 s
    gov.tick(31)  # then "stopped"
    with gov.session() as s:
        assert s.get(RunRow, run).status is RunStatus.LOST
        assert s.get(PodRow, pod).state is PodState.STOPPED

    dash = read_dashboard(gov)
    assert [b.id for b in dash.budgets] == [quiet, calm]
    [problem] = dash.budgets[0].problems
    assert (problem.severity, problem.kind, problem.where) == (
        Severity.WARNING,
        "run-lost",
        "job on quiet-pod",
    )
    assert f"governor run acknowledge {run}" in problem.message
    assert dash.budgets[0].runs[0].awaiting_acknowledgement

    acknowledged = ok(client.post(f"/v1/runs/{run}/acknowledge", json={"reason": "relaunched"}))
    assert acknowledged["acknowledged_at"] == gov.clock.now().isoformat().replace("+00:00", "Z")
    assert acknowledged["acknowledged_by"].startswith("the bootstrap operator token (tok_")
    assert read_dashboard(gov).budgets[0].problems == ()
    audited = {"category": "operator", "subject": f"run:{run}"}
    audit = ok(client.get("/v1/events", params=audited))["items"][0]
    assert audit["message"] == (
        f"Lost run 'job' on pod 'quiet-pod' acknowledged by {acknowledged['acknowledged_by']}: "
        "relaunched"
    )
    assert (audit["run_name"], audit["pod_name"]) == ("job", "quiet-pod")
    assert audit["evidence"]["reason"] == "relaunched"

    gov.clock.advance(5)
    again = ok(client.post(f"/v1/runs/{run}/acknowledge"))
    assert again["acknowledged_at"] == acknowledged["acknowledged_at"]  # idempotent
    audits = ok(client.get("/v1/events", params=audited))
    assert [e["message"] for e in audits["items"]].count(audit["message"]) == 1


def test_only_a_lost_run_can_be_acknowledged(gov: Governor, client: TestClient) -> None:
    budget = gov.budget(ceiling="100000")
    run = gov.run(budget, gov.pod(budget))
    refused = client.post(f"/v1/runs/{run}/acknowledge", json={"reason": "seen"})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "conflict"
    assert "is running" in refused.json()["error"]["message"]
    assert client.post("/v1/runs/run_unknown/acknowledge").status_code == 404


def test_a_jobs_extension_request_is_a_problem_named_by_its_run_and_pod(gov: Governor) -> None:
    budget = gov.budget(ceiling="100000")
    pod = gov.pod(budget, ref="gpu-a")
    spec = lifecycle.RunSpec("sft", pod)
    with gov.session() as s:
        run = lifecycle.create(s, gov.ctx.config, budget, spec, gov.clock.now())[0].id
    with gov.session() as s:
        extensions.request(
            s, budget, Decimal(40), "eval rerun", Requester.JOB, gov.clock.now(), run_id=run
        )
    [b] = read_dashboard(gov).budgets
    [problem] = b.problems
    assert (problem.kind, problem.subject, problem.run, problem.pod, problem.where) == (
        "extension-pending",
        "sft",  # the run that asked, not "job"
        "sft",
        "gpu-a",
        "sft on gpu-a",
    )
