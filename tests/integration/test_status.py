"""The dashboard's read model on both databases: figures, the spend series, stops, GPUs, runs,
admitted plans."""

from __future__ import annotations

from decimal import Decimal

from governor.api.routes.status import StatusOut
from governor.domain.health import Goal, HealthRule, Kind
from governor.domain.model import (
    Action,
    BudgetState,
    PodState,
    Reason,
    Requester,
    RunStatus,
    Severity,
)
from governor.domain.money import format_usd
from governor.domain.preflight.rules import Verdict
from governor.domain.telemetry import GIB
from governor.services.fleet import pods
from governor.services.jobs import checkins
from governor.services.money import extensions
from governor.services.monitoring import metric_history
from governor.services.plans import admission
from governor.services.runs import lifecycle
from governor.services.view import status
from governor.services.view.dashboard_model import MetricValue
from governor.services.view.status import thin
from tests.integration.conftest import (
    BY,
    WORST_CASE,
    Governor,
    check,
    gpu_sample,
    plan,
    read_dashboard,
    register,
)

D = Decimal


def test_a_budget_shows_the_books_figures_and_a_rising_spend_series(gov: Governor) -> None:
    budget = gov.budget(ceiling="100")
    pod = gov.pod(budget, storage_gb=100, storage="0.10", stopped_storage="0.05")
    for _ in range(6):
        gov.tick(600)  # $3.60/h: $0.60 of compute per pass, plus storage

    [b] = read_dashboard(gov).budgets
    book = gov.book(budget)
    f = book.figures
    assert (b.id, b.name, b.state) == (budget, "pilot", BudgetState.OPEN)
    assert (b.ceiling, b.approved_extensions, b.effective_ceiling) == (D(100), D(0), D(100))
    assert (b.spent, b.committed, b.remaining) == (f.spent, f.committed, f.remaining)
    assert b.burn_per_hour == f.burn_per_hour > D("3.60")
    assert b.projected_exhaustion_at == f.projected_exhaustion_at is not None
    assert b.spent_pct == round(float(f.spent), 1)
    assert b.attention is None

    chart = b.chart
    assert chart.start == book.budget.created_at and chart.end == gov.clock.now()
    assert len(chart.points) == 3  # the declaration, the ledger's hour that has ended, now
    spent = [p.spent for p in chart.points]
    assert spent[0] == 0 and spent == sorted(spent) and spent[-1] == f.spent
    assert [p.at for p in chart.points] == sorted(p.at for p in chart.points)
    assert [(t.pct, t.amount) for t in chart.thresholds] == [(50, 50), (80, 80), (90, 90)]
    assert chart.stops == ()

    [p] = b.pods
    assert (p.id, p.state, p.spent) == (pod, PodState.RUNNING, book.spent_on(book.pods[0]))
    assert p.compute_per_hour == D("3.60")
    assert p.storage_per_hour == D("0.10") * 100 / 730
    assert p.stopped_storage_per_hour == D("0.05") * 100 / 730
    assert p.burn_per_hour == p.compute_per_hour + p.storage_per_hour
    assert p.stop is None and p.gpus == ()


def test_stops_are_marked_on_the_chart_and_the_pod_costs_only_storage(gov: Governor) -> None:
    budget = gov.budget(ceiling="1.00")
    pod = gov.pod(budget, storage_gb=100, storage="0.10", stopped_storage="0.05")
    gov.tick(1000)  # past the ceiling: a stop is requested
    gov.tick(60)  # nobody to wait for: the provider is asked
    gov.tick(60)  # ... and confirms after its latency
    [b] = read_dashboard(gov).budgets
    assert b.attention is Severity.CRITICAL
    assert [(s.what, s.pod_id, s.reason) for s in b.chart.stops] == [
        ("requested", pod, Reason.CEILING),
        ("stopped", pod, Reason.CEILING),
    ]
    [p] = b.pods
    assert p.state is PodState.STOPPED
    assert p.stop is not None and p.stop.state == "stopped" and p.stop.confirmed_at is not None
    assert p.compute_per_hour == 0
    assert p.burn_per_hour == p.stopped_storage_per_hour == D("0.05") * 100 / 730


def test_a_pending_extension_is_listed_until_approved_then_counted(gov: Governor) -> None:
    budget = gov.budget(ceiling="10")
    with gov.session() as s:
        ext = extensions.request(s, budget, D("5"), "more steps", Requester.JOB, gov.clock.now()).id
    [b] = read_dashboard(gov).budgets
    [pending] = b.pending_extensions
    assert (pending.id, pending.amount, pending.reason) == (ext, D(5), "more steps")
    assert pending.requested_by is Requester.JOB
    assert pending.effective_ceiling_if_approved == D(15)
    assert b.effective_ceiling == D(10)

    with gov.session() as s:
        extensions.decide(s, gov.ctx.config, ext, True, None, gov.clock.now(), by=BY)
    [b] = read_dashboard(gov).budgets
    assert b.pending_extensions == ()
    assert (b.ceiling, b.approved_extensions, b.effective_ceiling) == (D(10), D(5), D(15))
    assert [t.amount for t in b.chart.thresholds] == [D("7.5"), D(12), D("13.5")]
    assert b.chart.effective_ceiling == D(15) and b.chart.ceiling == D(10)


def test_each_admitted_plan_shows_what_it_reserves_against_what_it_spent(gov: Governor) -> None:
    budget = gov.budget(ceiling="300")
    first = check(gov, budget, plan(gov, "arm-a"))
    second = check(gov, budget, plan(gov, "arm-b"))
    withdrawn = check(gov, budget, plan(gov, "arm-c"))
    with gov.session() as s:
        admission.withdraw(s, budget, withdrawn.id, gov.clock.now(), by=BY)
    run = gov.run(budget, register(gov, budget, first.id), timeout_s=10**6)
    gov.beat(run, step=1)
    gov.tick(3600)  # an hour at $3.60 on arm a's pod

    [b] = read_dashboard(gov).budgets
    spent = gov.book(budget).figures.spent
    assert spent > 0
    lines = [(p.plan_id, p.job_id, p.verdict, p.worst_case, p.spent, p.held) for p in b.plans]
    assert sorted(lines, key=lambda line: line[1]) == [
        (first.id, "arm-a", Verdict.GO, WORST_CASE, spent, WORST_CASE - spent),
        (second.id, "arm-b", Verdict.GO, WORST_CASE, D(0), WORST_CASE),
    ]
    assert not any(p.released or p.overridden for p in b.plans)
    assert b.committed < WORST_CASE  # what a plan holds is never committed spend
    assert b.held_for_plans == WORST_CASE - spent + WORST_CASE  # but is shown beside it
    assert b.committed == b.spent + b.shutdown + b.storage_tail + b.reserve
    out = StatusOut.model_validate(read_dashboard(gov)).model_dump(mode="json")["budgets"][0][
        "plans"
    ]
    [arm_a] = [p for p in out if p["job_id"] == "arm-a"]
    assert (arm_a["spent_usd"], arm_a["held_usd"], arm_a["worst_case_usd"]) == (
        format_usd(spent),
        format_usd(WORST_CASE - spent),
        format_usd(WORST_CASE),
    )
    assert arm_a["reserved_usd"] == arm_a["held_usd"]  # its former name, still sent

    gov.beat(run, step=2, status=RunStatus.FINISHED)
    [b] = read_dashboard(gov).budgets
    assert sorted((p.job_id, p.released, p.held) for p in b.plans) == [
        ("arm-a", True, D(0)),
        ("arm-b", False, WORST_CASE),
    ]


def test_runs_show_phase_progress_heartbeat_age_and_directive(gov: Governor) -> None:
    budget = gov.budget(ceiling="1000")
    pod = gov.pod(budget)
    quiet = gov.run(budget, pod, timeout_s=60, total_steps=400)
    gov.beat(quiet, step=100)
    gov.clock.advance(30)
    [b] = read_dashboard(gov).budgets
    [r] = b.runs
    assert (r.id, r.status, r.step, r.total_steps, r.progress_pct) == (
        quiet,
        RunStatus.RUNNING,
        100,
        400,
        25.0,
    )
    assert r.heartbeat_age_s == 30 and not r.heartbeat_late
    assert r.directive is Action.CONTINUE

    gov.clock.advance(31)
    [r] = read_dashboard(gov).budgets[0].runs
    assert r.heartbeat_age_s == 61 and r.heartbeat_late


def test_gpu_traces_hold_recent_samples_and_the_peak(gov: Governor) -> None:
    budget = gov.budget(ceiling="1000")
    pod = gov.pod(budget)
    gov.run(budget, pod)
    gov.report(pod, gpu_sample(95, 70, 0), gpu_sample(40, 20, 1))  # the run's peak on GPU 0: 70 GiB
    gov.clock.advance(20 * 60)  # older than the sparkline's window
    for util, used in ((90, 50), (0, 19.5), (50, 30)):
        gov.clock.advance(5)
        gov.report(pod, gpu_sample(util, used, 0), gpu_sample(util, used, 1))

    [p] = read_dashboard(gov).budgets[0].pods
    g0, g1 = p.gpus
    assert (g0.index, g0.uuid, g1.index) == (0, "GPU-0", 1)
    assert [pt.utilization_pct for pt in g0.points] == [90, 0, 50]
    assert [pt.memory_used_bytes for pt in g0.points] == [50 * GIB, int(19.5 * GIB), 30 * GIB]
    assert (g0.utilization_pct, g0.memory_used_bytes) == (50, 30 * GIB)
    assert g0.peak_utilization_pct == 90
    assert g0.peak_memory_bytes == 70 * GIB  # the run's measured peak, from before the window
    assert g1.peak_memory_bytes == 50 * GIB  # its run peak (20 GiB) is below the window's
    assert g0.memory_total_bytes == 80 * GIB and g0.last_at == gov.clock.now()


def test_a_run_line_shows_its_latest_metrics_the_watched_ones_first(gov: Governor) -> None:
    budget = gov.budget(ceiling="1000")
    pod = gov.pod(budget)
    watch = HealthRule(Kind.NO_IMPROVEMENT, "reward_mean", window=50, goal=Goal.MAX)
    with gov.session() as s:
        spec = lifecycle.RunSpec("rl", pod, heartbeat_timeout_s=3600, health=(watch,))
        run = lifecycle.create(s, gov.ctx.config, budget, spec, gov.clock.now())[0].id
    [r] = read_dashboard(gov).budgets[0].runs
    assert r.metrics == ()
    # Each beat carries only what is new since the last one, as governor.client sends it.
    for step, metrics in (
        (1, {"loss": 2.5, "kl": 0.01, "reward_mean": 0.5, "lr": 1e-4, "grad_norm": 1.0}),
        (2, {"loss": 2.25, "grad_norm": "Infinity", "note": "warmup"}),
    ):
        gov.clock.advance(10)
        beat = checkins.Heartbeat(step=step, metrics=metrics)
        checkins.check_in(gov.ctx.sessions, gov.ctx.config, run, beat, gov.clock.now())

    [r] = read_dashboard(gov).budgets[0].runs
    # loss (watched on every run), reward_mean (this run's rule), then the rest by name, four
    # at most (lr is left out); the infinite grad norm as it was sent, not its last finite value.
    # Each with its recent finite values, oldest first, for its sparkline.
    assert r.metrics == (
        MetricValue("loss", 2.25, (2.5, 2.25)),
        MetricValue("reward_mean", 0.5, (0.5,)),
        MetricValue("grad_norm", "Infinity", (1.0,)),
        MetricValue("kl", 0.01, (0.01,)),
    )
    with gov.session() as s:  # the last `most` of each series, of the names asked for alone
        assert metric_history.recent(s, [run], ["loss", "lr"], 1) == {
            (run, "loss"): [2.25],
            (run, "lr"): [1e-4],
        }


def test_on_a_shared_machine_each_gpu_says_whether_it_is_the_pods_own(gov: Governor) -> None:
    budget = gov.budget(ceiling="1000")
    shared = pods.Registration("fake", "shared-1", gpu_uuids=["GPU-1"])
    with gov.session() as s:
        owner = pods.register(s, gov.ctx, budget, shared, gov.clock.now()).id
    whole = gov.pod(budget, "whole-1")
    for pod in (owner, whole):
        gov.report(pod, gpu_sample(55, 30, 0), gpu_sample(0, 19.5, 1))

    traces = {p.id: [(g.uuid, g.own) for g in p.gpus] for p in read_dashboard(gov).budgets[0].pods}
    assert traces[owner] == [("GPU-0", False), ("GPU-1", True)]  # GPU-0 is a neighbour's
    assert traces[whole] == [("GPU-0", True), ("GPU-1", True)]  # names none: owns them all


def test_latest_events_come_newest_first_with_their_budget(gov: Governor) -> None:
    first = gov.budget(ceiling="1.00")
    gov.pod(first)
    gov.tick(1000)
    dash = read_dashboard(gov)
    assert dash.at == gov.clock.now()
    assert 0 < len(dash.events) <= status.EVENTS
    assert [e.id for e in dash.events] == sorted((e.id for e in dash.events), reverse=True)
    assert dash.events[-1].message.startswith("Budget 'pilot' declared")
    assert {e.budget_name for e in dash.events} == {"pilot"}
    assert any(e.severity is Severity.CRITICAL for e in dash.events)


def test_a_long_ledger_is_thinned_to_a_bounded_series_that_keeps_its_ends(gov: Governor) -> None:
    budget = gov.budget(ceiling="100000")
    gov.pod(budget)
    for _ in range(status.CHART_POINTS + 20):
        gov.tick(3600)  # the ledger keeps an entry per hour
    chart = read_dashboard(gov).budgets[0].chart
    assert len(chart.points) == status.CHART_POINTS
    assert chart.points[0].spent == 0 and chart.points[0].at == chart.start
    assert chart.points[-1].at == gov.clock.now()
    assert chart.points[-1].spent == gov.book(budget).figures.spent


def test_no_budgets_is_an_empty_dashboard(gov: Governor) -> None:
    dash = read_dashboard(gov)
    assert dash.budgets == () and dash.events == ()


def test_thin_keeps_first_and_last() -> None:
    assert thin([1, 2, 3], 5) == (1, 2, 3)
    thinned = thin(list(range(1000)), 10)
    assert len(thinned) == 10 and thinned[0] == 0 and thinned[-1] == 999
    assert list(thinned) == sorted(thinned)
