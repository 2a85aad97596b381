"""Stop -> extend -> resume: a stopped pod starts again once its budget is open, after the
money and plan checks, and its run takes up its next attempt with a new token; a budget
closes, and releases its pods' storage when told it was deleted (SQLite and PostgreSQL)."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from governor.db import repository as repo
from governor.domain.errors import Conflict, Unauthenticated, Unavailable
from governor.domain.ledger import committed_in_parts
from governor.domain.model import (
    Action,
    BudgetState,
    Category,
    ExtensionState,
    Phase,
    PodState,
    Reason,
    Requester,
    Role,
    RunStatus,
)
from governor.domain.preflight.rules import Verdict
from governor.services.fleet import budgets, pods, resumes
from governor.services.jobs.checkins import Checkpoint
from governor.services.money import extensions
from governor.services.plans import admission
from governor.services.plans.document import read_plan
from governor.services.security import tokens
from tests.integration.conftest import BY, Governor
from tests.plans import variant

D = Decimal


def exhaust(gov: Governor, ceiling: str = "1.00") -> tuple[str, str, str]:
    """A budget whose job saved at step 400 when told to stop at its ceiling: exhausted."""
    budget = gov.budget(ceiling=ceiling)
    pod = gov.pod(budget)
    run = gov.run(budget, pod, timeout_s=3600, grace_s=60)
    gov.beat(run, step=400)
    gov.tick(int(D(ceiling) / D("3.60") * 3600 * D("0.9")))  # 90% spent: the ceiling committed
    directive = gov.beat(run, step=450)
    assert (directive.action, directive.reason) == (Action.STOP, Reason.CEILING)
    gov.beat(run, step=450, status=RunStatus.STOPPING, checkpoint=Checkpoint(450, "/ws/ck-450"))
    gov.tick(1)
    gov.tick(30)  # the fake cloud's stop latency
    assert gov.book(budget).budget.state is BudgetState.EXHAUSTED
    return budget, pod, run


def extend(gov: Governor, budget: str, amount: str) -> None:
    with gov.session() as s:
        ext = extensions.request(
            s, budget, D(amount), "finish", Requester.OPERATOR, gov.clock.now()
        )
    with gov.session() as s:
        extensions.decide(s, gov.ctx.config, ext.id, True, None, gov.clock.now(), by=BY)


def resume(gov: Governor, pod: str) -> resumes.Resumed:
    return resumes.resume(gov.ctx, pod, "extension approved", by=BY)


def principal(gov: Governor, token: str) -> tokens.Principal:
    with gov.session() as s:
        return tokens.authenticate(s, token, gov.clock.now())


def test_an_exhausted_budget_refuses_a_resume_with_its_figures(gov: Governor) -> None:
    budget, pod, _ = exhaust(gov)
    f = gov.book(budget).figures
    assert f.committed < f.effective_ceiling  # the stop margin released: any extension reopens
    said = (
        f"exhausted: {committed_in_parts(f)} of $1.00; approve an extension of at least $0.01 "
        "to reopen it first"
    )
    with pytest.raises(Conflict, match=re.escape(said)):
        resume(gov, pod)
    # The notice that it is exhausted says so too (no pod bills: its figures hold still).
    with gov.session() as s:
        [told] = [
            e.message
            for e in repo.events(s, budget_id=budget, category=Category.BUDGET)
            if e.message.startswith("Budget exhausted")
        ]
    assert told == (
        "Budget exhausted: every pod is stopped with its workspace kept. The ceiling $1.00 was "
        f"reached at {committed_in_parts(f)}: approve an extension of at least $0.01 to go on."
    )
    with gov.session() as s:
        assert repo.get_pod(s, pod).state is PodState.STOPPED


def test_after_an_extension_the_pod_resumes_and_the_run_continues_from_its_checkpoint(
    gov: Governor,
) -> None:
    budget, pod, run = exhaust(gov)
    with gov.session() as s:
        old_token = tokens.issue(s, Role.JOB, gov.clock.now(), run_id=run, budget_id=budget)
    extend(gov, budget, "10")
    resumed = resume(gov, pod)
    assert resumed.pod.state is PodState.RUNNING and resumed.token is not None
    assert resumed.run is not None and resumed.run.id == run
    with gov.session() as s:
        again = repo.get_run(s, run)
        assert (again.attempt, again.status, again.step) == (2, RunStatus.RUNNING, 450)
        assert again.ended_at is None and again.started_at == gov.clock.now()
        assert again.directive is Action.CONTINUE
    assert principal(gov, resumed.token).run_id == run
    with pytest.raises(Unauthenticated, match="revoked"):
        principal(gov, old_token)
    assert gov.cloud.describe("pod-1").state is PodState.RUNNING
    assert gov.beat(run, step=451).action is Action.CONTINUE
    # the second stop comes at the new ceiling, and spend never goes above it
    step = 451
    while gov.beat(run, step=step).action is not Action.STOP:
        assert step < 700, "the new ceiling was never reached"
        gov.tick(60)
        step += 1
    assert gov.beat(run, step=step).reason is Reason.CEILING
    ack = Checkpoint(step, f"/ws/ck-{step}")
    gov.beat(run, step=step, status=RunStatus.STOPPING, checkpoint=ack)
    gov.tick(1)
    gov.tick(30)
    book = gov.book(budget)
    assert book.budget.state is BudgetState.EXHAUSTED
    assert book.figures.spent <= book.figures.effective_ceiling == D("11.00")
    with gov.session() as s:
        assert repo.get_run(s, run).status is RunStatus.STOPPED


def run_events(gov: Governor, run: str) -> list[str]:
    with gov.session() as s:
        return [e.message for e in reversed(repo.events(s, subject=f"run:{run}", limit=1000))]


def test_a_resumed_attempt_starting_before_its_checkpoint_is_not_a_restart(gov: Governor) -> None:
    budget, pod, run = exhaust(gov)  # its checkpoint is at step 450
    extend(gov, budget, "10")
    resume(gov, pod)
    gov.tick(5)
    # The relaunched job says step 0 while it loads, then the checkpoint's step once loaded.
    assert gov.beat(run, step=0, phase=Phase.LOADING).action is Action.CONTINUE
    gov.tick(5)
    gov.beat(run, step=450, phase=Phase.TRAINING)
    gov.beat(run, step=460)
    assert not [m for m in run_events(gov, run) if "restarted" in m]
    with gov.session() as s:
        assert repo.get_run(s, run).step == 460
    # Within the attempt, a step that goes backwards is the job restarting.
    gov.beat(run, step=450)
    [restart] = [m for m in run_events(gov, run) if "restarted" in m]
    assert restart.startswith("The job restarted from step 450 (it had reached step 460)")


def test_a_resumed_attempt_starting_at_its_checkpoint_is_not_a_restart(gov: Governor) -> None:
    budget, pod, run = exhaust(gov)
    extend(gov, budget, "10")
    resume(gov, pod)
    gov.beat(run, step=450)
    gov.beat(run, step=451)
    assert not [m for m in run_events(gov, run) if "restart" in m]


def finished_and_stopped(gov: Governor) -> tuple[str, str, str]:
    """A run that finished, and its pod stopped by the finished rule after its linger."""
    budget = gov.budget("100")
    pod = gov.pod(budget)
    run = gov.run(budget, pod)
    gov.beat(run, step=100, status=RunStatus.FINISHED)
    gov.tick(61)
    gov.tick(30)  # the fake cloud's stop latency
    with gov.session() as s:
        order = repo.latest_stop_order(s, pod)
        assert order is not None and order.reason is Reason.FINISHED
        assert repo.get_pod(s, pod).state is PodState.STOPPED
    return budget, pod, run


def pod_now(gov: Governor, pod: str) -> tuple[PodState, Reason | None]:
    """The pod's state, and the reason of a stop ordered since the resume."""
    with gov.session() as s:
        row = repo.get_pod(s, pod)
        order = repo.latest_stop_order(s, pod)
        assert row.resumed_at is not None
        since = order is not None and order.created_at >= row.resumed_at
        return row.state, order.reason if order is not None and since else None


def test_a_pod_resumed_after_its_run_finished_waits_the_resume_grace(gov: Governor) -> None:
    grace = gov.ctx.config.resume_grace_s
    assert grace == 900.0  # the default
    _, pod, _ = finished_and_stopped(gov)
    gov.tick(3600)  # the run finished over an hour before the resume
    resumed = resume(gov, pod)
    assert resumed.run is None and resumed.pod.state is PodState.RUNNING
    gov.tick(5)
    assert pod_now(gov, pod) == (PodState.RUNNING, None)
    gov.tick(grace - 6)
    assert pod_now(gov, pod) == (PodState.RUNNING, None)
    gov.tick(1)  # the grace is over and no run is live on the pod
    assert pod_now(gov, pod) == (PodState.STOPPING, Reason.FINISHED)
    with gov.session() as s:
        [stop] = [e for e in repo.events(s, subject=f"pod:{pod}", limit=5) if "Stop" in e.message]
    assert stop.message.startswith(
        f"Stop ordered (finished): The pod was resumed {grace:.0f} s ago and no run is live on it"
    )


def test_a_resumed_pod_with_a_live_run_is_not_stopped_after_the_grace(gov: Governor) -> None:
    budget, pod, _ = finished_and_stopped(gov)
    resume(gov, pod)
    gov.tick(60)
    following = gov.run(budget, pod, timeout_s=600)
    for step in range(1, 5):
        gov.beat(following, step=step)
        gov.tick(gov.ctx.config.resume_grace_s / 3)
    assert pod_now(gov, pod) == (PodState.RUNNING, None)
    gov.beat(following, step=5, status=RunStatus.FINISHED)
    gov.tick(61)  # a run that ends after the resume lingers as usual
    assert pod_now(gov, pod) == (PodState.STOPPING, Reason.FINISHED)


def test_a_resume_the_new_ceiling_cannot_cover_is_refused_with_the_figures(
    gov: Governor,
) -> None:
    budget, pod, _ = exhaust(gov)
    extend(gov, budget, "0.03")  # reopens ($0.93 committed) but not with the pod running
    assert gov.book(budget).budget.state is BudgetState.OPEN
    with pytest.raises(Conflict, match=r"would commit \$[\d.]+ of the effective ceiling \$1\.03"):
        resume(gov, pod)
    with gov.session() as s:
        assert repo.get_pod(s, pod).state is PodState.STOPPED
        assert repo.get_run(s, repo.runs_on_pod(s, pod)[0].id).attempt == 1


def test_the_rate_is_read_again_at_resume(gov: Governor) -> None:
    budget, pod, _ = exhaust(gov)
    extend(gov, budget, "10")
    gov.cloud.state.pods["pod-1"].hourly_rate_usd = "4.20"
    resumed = resume(gov, pod)
    assert resumed.pod.hourly_rate_usd == D("4.20")
    assert gov.book(budget).figures.burn_per_hour == D("4.20")


def test_no_capacity_leaves_the_pod_stopped_with_an_event(gov: Governor) -> None:
    budget, pod, run = exhaust(gov)
    extend(gov, budget, "10")
    gov.cloud.resume_refusals = 1
    with pytest.raises(resumes.ResumeRefused, match="no capacity"):
        resume(gov, pod)
    with gov.session() as s:
        assert repo.get_pod(s, pod).state is PodState.STOPPED
        ended = repo.get_run(s, run)
        assert (ended.status, ended.attempt) == (RunStatus.STOPPED, 1)
        assert "did not start the pod again" in repo.events(s, limit=1)[0].message
    assert resume(gov, pod).pod.state is PodState.RUNNING  # capacity came back


def test_a_provider_that_does_not_answer_is_unavailable_and_the_pod_stays_stopped(
    gov: Governor,
) -> None:
    budget, pod, _ = exhaust(gov)
    extend(gov, budget, "10")
    gov.cloud.state.pods["pod-1"].stop_requested_at = gov.clock.now().isoformat()
    gov.cloud.state.pods["pod-1"].stopped_at = None  # the cloud says it is still stopping
    with pytest.raises(Unavailable):
        resume(gov, pod)
    with gov.session() as s:
        assert repo.get_pod(s, pod).state is PodState.STOPPED


def test_a_running_pod_cannot_be_resumed(gov: Governor) -> None:
    budget = gov.budget("100")
    pod = gov.pod(budget)
    with pytest.raises(Conflict, match="running: only a stopped pod"):
        resume(gov, pod)


def test_a_resume_cut_short_is_settled_from_what_the_provider_says(gov: Governor) -> None:
    budget, pod, _ = exhaust(gov)
    extend(gov, budget, "10")
    with gov.session() as s:
        row = repo.get_pod(s, pod)
        row.state, row.resumed_at = PodState.RESUMING, gov.clock.now()  # asked, then a crash
    gov.tick(resumes.SETTLE_AFTER_S - 1)
    with gov.session() as s:
        assert repo.get_pod(s, pod).state is PodState.RESUMING  # may still be in flight
    gov.tick(2)
    with gov.session() as s:
        assert repo.get_pod(s, pod).state is PodState.STOPPED  # the cloud never started it
        assert "found stopped after a resume cut short" in repo.events(s, limit=1)[0].message


def close(gov: Governor, budget: str, storage_deleted: bool = False) -> None:
    with gov.session() as s:
        budgets.close(s, budget, "pilot over", storage_deleted, gov.clock.now(), by=BY)


def test_a_budget_with_a_billing_pod_cannot_close(gov: Governor) -> None:
    budget = gov.budget("100")
    pod = gov.pod(budget)
    with pytest.raises(Conflict, match=f"still has pods billing compute \\({pod}\\)"):
        close(gov, budget)


def test_closing_ends_requests_and_storage_counts_until_it_is_deleted(gov: Governor) -> None:
    budget = gov.budget("100", tail_hours=0)
    pod = gov.pod(budget, storage_gb=1000, storage="0.10")
    with gov.session() as s:
        ext = extensions.request(s, budget, D("5"), "more", Requester.JOB, gov.clock.now())
        pods.stop_manually(s, gov.ctx, pod, "done", gov.clock.now(), by=BY)
    gov.tick(1)
    gov.tick(30)
    close(gov, budget)
    book = gov.book(budget)
    assert book.budget.state is BudgetState.CLOSED and book.budget.closed_at is not None
    with gov.session() as s:
        assert repo.get_extension(s, ext.id).state is ExtensionState.EXPIRED
    with pytest.raises(Conflict, match="closed"):
        resume(gov, pod)
    spent = book.figures.spent
    gov.tick(3600)
    assert gov.book(budget).figures.spent > spent  # its stopped storage still counts
    close(gov, budget, storage_deleted=True)
    released = gov.book(budget)
    assert released.budget.state is BudgetState.CLOSED
    with gov.session() as s:
        row = repo.get_pod(s, pod)
        assert row.state is PodState.GONE and row.released_at == gov.clock.now()
    gov.tick(3600)
    assert gov.book(budget).figures.spent == released.figures.spent
    with gov.session() as s, pytest.raises(Conflict, match="closed"):
        extensions.request(s, budget, D("1"), "x", Requester.OPERATOR, gov.clock.now())


def test_a_resume_cut_short_that_the_provider_carried_out_leaves_the_pod_running(
    gov: Governor,
) -> None:
    budget, pod, run = exhaust(gov)
    extend(gov, budget, "10")
    with gov.session() as s:
        row = repo.get_pod(s, pod)
        row.state, row.resumed_at = PodState.RESUMING, gov.clock.now()
    gov.cloud.resume("pod-1")  # the provider started it; the governor never heard back
    gov.tick(resumes.SETTLE_AFTER_S + 1)
    with gov.session() as s:
        assert repo.get_pod(s, pod).state is PodState.RUNNING
        assert repo.get_run(s, run).attempt == 2
        assert any("token was never handed out" in e.message for e in repo.events(s, limit=5))


def test_the_budgets_plan_is_judged_again_before_a_resume(gov: Governor) -> None:
    budget = gov.budget(ceiling="100")
    plan = variant({"hardware.rate_quoted_at": gov.clock.now().date().isoformat()})
    with gov.session() as s:
        first = admission.check(s, gov.ctx.config, budget, read_plan(plan), plan, gov.clock.now())
        assert first.verdict is Verdict.GO  # its worst case, $65.20, fits in $100
    pod = gov.pod(budget)
    run = gov.run(budget, pod, timeout_s=10**6, grace_s=60)
    gov.beat(run, step=1)
    gov.tick(90_000)  # 25 h: $90 spent, the ceiling committed
    gov.beat(run, step=2, status=RunStatus.STOPPING, checkpoint=Checkpoint(2, "/ws/ck-2"))
    gov.tick(1)
    gov.tick(30)
    extend(gov, budget, "30")  # enough to run, not for the plan's worst case
    with pytest.raises(Conflict, match="no longer passes preflight"):
        resume(gov, pod)
    with gov.session() as s:
        assert repo.get_pod(s, pod).state is PodState.STOPPED
    extend(gov, budget, "100")
    assert resume(gov, pod).pod.state is PodState.RUNNING
    with gov.session() as s:  # the verdict of a resume that went ahead is kept
        assert [c.verdict for c in repo.plan_checks_of(s, budget)] == [Verdict.GO, Verdict.GO]
