"""Plans that bind (SQLite and PostgreSQL): a no_go plan refuses pods and runs unless an
operator overrides it; a budget may require a plan; a verdict judged against another ceiling
is judged again; each admitted plan reserves what it may still cost when the next is judged,
and lets it go when it is withdrawn or its runs have ended."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from governor.db import repository as repo
from governor.db.tables import PlanCheckRow
from governor.domain.errors import Conflict
from governor.domain.model import Action, Phase, Reason, Requester, RunStatus
from governor.domain.preflight.rules import Verdict
from governor.domain.telemetry import GIB, GpuProcess, GpuSample
from governor.services.fleet import budgets
from governor.services.jobs import checkins
from governor.services.money import extensions
from governor.services.monitoring import telemetry
from governor.services.plans import admission
from governor.services.plans.document import read_plan
from tests.integration.conftest import BY, WORST_CASE, Governor, check, gpu_sample, plan, register

# Verdicts on the modeled peak: these plans sit at chosen shares of their cards.
pytestmark = pytest.mark.usefixtures("exact_model")

D = Decimal


def test_a_no_go_plan_refuses_pods_until_an_operator_overrides_it(gov: Governor) -> None:
    budget = gov.budget("500")
    no_canary = check(gov, budget, plan(gov, **{"phases.1.name": "warmup"}))
    assert no_canary.verdict is Verdict.NO_GO
    with pytest.raises(Conflict, match=r"is no_go: .*canary.*override"):
        register(gov, budget, no_canary.id)
    with gov.session() as s:
        admission.override(
            s, budget, no_canary.id, "the canary ran yesterday", gov.clock.now(), by=BY
        )
    pod = register(gov, budget, no_canary.id)
    run = gov.run(budget, pod)  # its runs are admitted under the same override
    with gov.session() as s:
        assert repo.get_pod(s, pod).plan_id == no_canary.id
        assert repo.get_run(s, run).status is RunStatus.RUNNING
        [event] = repo.events(s, subject=f"plan:{no_canary.id}", severity=None)[:1]
        assert "no_go verdict of plan 'arm-a' overridden by operator token 'tests'" in event.message
        assert event.evidence["by"]["token_id"] == "tok_tests"
        assert "the canary ran yesterday" in event.message


def test_a_budget_that_requires_a_plan_refuses_a_pod_without_one(gov: Governor) -> None:
    with gov.session() as s:
        declaration = budgets.Declaration("strict", D("500"), require_plan=True)
        budget = budgets.declare(s, declaration, gov.clock.now()).id
    with pytest.raises(Conflict, match="requires a plan"):
        register(gov, budget, None)
    good = check(gov, budget, plan(gov))
    assert good.verdict is Verdict.GO
    register(gov, budget, good.id)


def test_a_verdict_judged_against_another_ceiling_is_judged_again(gov: Governor) -> None:
    budget = gov.budget("500")
    good = check(gov, budget, plan(gov))
    with gov.session() as s:
        ext = extensions.request(s, budget, D("50"), "more", Requester.OPERATOR, gov.clock.now())
    with gov.session() as s:
        extensions.decide(s, gov.ctx.config, ext.id, True, None, gov.clock.now(), by=BY)
    with pytest.raises(Conflict, match=r"judged against a ceiling of \$500\.00.*\$550\.00"):
        register(gov, budget, good.id)
    gov.clock.advance(60)
    check(gov, budget, plan(gov))  # the same plan, judged again
    register(gov, budget, good.id)  # a pod names the plan; its latest verdict binds


def test_a_second_arm_is_judged_against_what_the_first_leaves(gov: Governor) -> None:
    budget = gov.budget("100")
    first = check(gov, budget, plan(gov, "arm-a"))
    assert first.verdict is Verdict.GO and first.reserved_usd == 0
    second = check(gov, budget, plan(gov, "arm-b"))
    assert second.verdict is Verdict.NO_GO  # $100 less arm a's $65.20 cannot hold it
    assert second.reserved_usd == WORST_CASE
    assert second.figures["cost"]["reserved_for_plans_usd"] == "65.204859"
    cost = next(r for r in second.reasons if r["rule"] == "cost_fit")
    assert "$65.20 held for the budget's other admitted plans" in cost["message"]
    assert gov.book(budget).figures.committed == 0  # a reservation is never committed spend

    with gov.session() as s:
        admission.withdraw(s, budget, first.id, gov.clock.now(), by=BY)
    gov.clock.advance(60)
    again = check(gov, budget, plan(gov, "arm-b"))
    assert (again.verdict, again.reserved_usd) == (Verdict.GO, 0)


def test_a_plans_reservation_shrinks_with_its_spend_and_ends_with_its_runs(gov: Governor) -> None:
    budget = gov.budget("200")
    first = check(gov, budget, plan(gov, "arm-a"))
    pod = register(gov, budget, first.id)
    run = gov.run(budget, pod, timeout_s=10**6)
    gov.beat(run, step=1)
    gov.tick(3600)  # an hour at $3.60
    with gov.session() as s:
        book = budgets.book(s, gov.ctx.config, budget, gov.clock.now())
        [held] = admission.reservations(s, book)
    assert held.spent == book.spent_on(book.pods[0]) > 0
    assert held.held == WORST_CASE - held.spent and not held.released
    gov.beat(run, step=2, status=RunStatus.FINISHED)
    with gov.session() as s:
        [done] = admission.reservations(s, budgets.book(s, gov.ctx.config, budget, gov.clock.now()))
    assert done.released and done.held == 0


def test_a_check_on_a_pod_names_the_gpu_with_room_for_the_plan(gov: Governor) -> None:
    budget = gov.budget("500")
    pod = gov.pod(budget)
    busy = gpu_sample(util=55, used_gib=50, index=0)  # a neighbour holds 50 of 80 GiB
    free = gpu_sample(util=0, used_gib=2, index=1)
    gov.report(pod, busy, free)
    document = plan(gov)  # one GPU, 60.64 GiB modeled
    with gov.session() as s:
        row = admission.check(
            s, gov.ctx.config, budget, read_plan(document), document, gov.clock.now(), pod_id=pod
        )
        placed = next(r for r in row.reasons if r["rule"] == "placement")
    assert (row.verdict, placed["verdict"]) == (Verdict.GO, "go")
    assert "1 of the pod's 2 GPUs have room" in placed["message"]
    assert "GPU 1 GPU-1 (78.0 GiB free)" in placed["message"]
    fits = {g["uuid"]: (g["fits"], g["margin_gib"]) for g in placed["evidence"]["gpus"]}
    assert fits == {"GPU-0": (False, -30.64), "GPU-1": (True, 17.36)}

    two = plan(gov, "arm-two-gpus", **{"hardware.gpu_count": 2})
    with gov.session() as s:
        row = admission.check(
            s, gov.ctx.config, budget, read_plan(two), two, gov.clock.now(), pod_id=pod
        )
    assert row.verdict is Verdict.NO_GO
    assert any("Only 1 of the pod's 2 GPUs" in r["message"] for r in row.reasons)

    # On a shared machine the pod names its own GPUs: the neighbour's is no longer judged.
    with gov.session() as s:
        telemetry.claim(s, repo.get_pod(s, pod), ["GPU-1"], gov.clock.now())
        row = admission.check(
            s, gov.ctx.config, budget, read_plan(document), document, gov.clock.now(), pod_id=pod
        )
        placed = next(r for r in row.reasons if r["rule"] == "placement")
    assert [g["uuid"] for g in placed["evidence"]["gpus"]] == ["GPU-1"]
    assert "1 of the pod's 1 GPUs have room" in placed["message"], placed["message"]


CANARY_ONLY = {"memory_per_gpu_gib.logits_peak": 98}  # 130.7 of 139.7 GiB: the canary must prove it


def held_run(gov: Governor, budget: str) -> tuple[PlanCheckRow, str, str]:
    held = check(gov, budget, plan(gov, **CANARY_ONLY))
    assert held.verdict is Verdict.CANARY_ONLY
    pod = register(gov, budget, held.id)
    run = gov.run(budget, pod, timeout_s=10**6, grace_s=0)
    return held, pod, run


def test_a_canary_only_run_hears_its_hold_and_is_stopped_if_it_trains(gov: Governor) -> None:
    budget = gov.budget("500")
    _, pod, run = held_run(gov, budget)
    told = gov.beat(run, step=1, phase=Phase.CANARY)
    assert (told.action, told.reason) == (Action.CONTINUE, Reason.CANARY_HOLD)
    assert told.message is not None and "under 132.7 GiB per GPU after 2" in told.message
    gov.tick(10)
    assert gov.beat(run, step=2, phase=Phase.CANARY).action is Action.CONTINUE
    gov.beat(run, step=3, phase=Phase.TRAINING)
    gov.tick(1)
    stopped = gov.beat(run, step=4, phase=Phase.TRAINING)
    assert (stopped.action, stopped.reason) == (Action.STOP, Reason.CANARY_HOLD)
    assert stopped.message is not None and "has not proven its memory" in stopped.message
    with gov.session() as s:
        assert repo.latest_stop_order(s, pod) is not None


def test_a_canary_is_stopped_at_its_spend_cap(gov: Governor) -> None:
    budget = gov.budget("500")
    _, _, run = held_run(gov, budget)
    for step in range(1, 19):  # 3 h at $3.60/h, progressing: past the canary's $10.31
        gov.beat(run, step=step, phase=Phase.CANARY)
        gov.tick(600)
    stopped = gov.beat(run, step=19, phase=Phase.CANARY)
    assert (stopped.action, stopped.reason) == (Action.STOP, Reason.CANARY_HOLD)
    assert "of its $10.31 cap" in (stopped.message or "")


def test_a_canary_is_released_only_after_its_steps_eval_batch_and_checkpoint(
    gov: Governor,
) -> None:
    budget = gov.budget("500")
    held, pod, run = held_run(gov, budget)
    told = gov.beat(run, step=1, phase=Phase.CANARY)
    assert told.message is not None
    assert "after 2 optimizer steps in phase 'canary', one 'evaluation' batch and one " in (
        told.message
    )
    gov.report(pod, gpu_sample(util=90, used_gib=70))  # 70 GiB peak: under 132.7
    gov.tick(1)
    assert gov.beat(run, step=1, phase=Phase.CANARY).reason is Reason.CANARY_HOLD  # 1 of 2 steps
    gov.beat(run, step=2, phase=Phase.CANARY)
    gov.tick(1)
    assert gov.beat(run, step=2, phase=Phase.CANARY).reason is Reason.CANARY_HOLD  # no eval yet
    assert gov.beat(run, step=2, phase=Phase.EVALUATION).action is Action.CONTINUE
    gov.tick(1)
    evaluated = gov.beat(run, step=2, phase=Phase.EVALUATION)  # an eval batch: not training
    assert (evaluated.action, evaluated.reason) == (Action.CONTINUE, Reason.CANARY_HOLD)
    saved = checkins.Checkpoint(step=2, path="/workspace/ckpt-2")
    gov.beat(run, step=2, phase=Phase.CHECKPOINTING, checkpoint=saved)
    gov.tick(1)
    released = gov.beat(run, step=3, phase=Phase.TRAINING)
    assert (released.action, released.reason) == (Action.CONTINUE, None)
    gov.tick(1)
    assert gov.beat(run, step=4, phase=Phase.TRAINING).action is Action.CONTINUE
    with gov.session() as s:
        latest = admission.latest(s, budget, held.id)
        assert latest.canary_released_by == "by telemetry" and latest.canary_peak_gib == 70.0


def test_an_eval_batch_before_the_canarys_steps_does_not_count(gov: Governor) -> None:
    budget = gov.budget("500")
    held, pod, run = held_run(gov, budget)
    gov.beat(run, step=1, phase=Phase.EVALUATION)  # before the optimizer state exists
    gov.report(pod, gpu_sample(util=90, used_gib=70))
    gov.beat(run, step=2, phase=Phase.CANARY)
    gov.beat(run, step=2, checkpoint=checkins.Checkpoint(step=2, path="/workspace/ckpt-2"))
    gov.tick(1)
    assert gov.beat(run, step=3, phase=Phase.CANARY).reason is Reason.CANARY_HOLD
    with gov.session() as s:
        assert admission.latest(s, budget, held.id).canary_released_at is None


def test_a_canary_over_its_threshold_is_stopped_on_the_measurement(gov: Governor) -> None:
    budget = gov.budget("500")
    held, pod, run = held_run(gov, budget)
    gov.beat(run, step=1, phase=Phase.CANARY)
    gov.report(pod, h200_sample(used_gib=136.2))  # over 132.7 GiB, long before the $10.31 cap
    gov.tick(1)
    stopped = gov.beat(run, step=1, phase=Phase.CANARY)
    assert (stopped.action, stopped.reason) == (Action.STOP, Reason.CANARY_OVER)
    assert stopped.message is not None
    assert "136.2 GiB per GPU, over its release threshold of 132.7 GiB" in stopped.message
    with gov.session() as s:
        order = repo.latest_stop_order(s, pod)
        assert order is not None and order.reason is Reason.CANARY_OVER
        assert admission.latest(s, budget, held.id).canary_released_at is None


def test_a_held_canary_keeps_its_reason_when_memory_runs_low(gov: Governor) -> None:
    budget = gov.budget("500")
    _, pod, run = held_run(gov, budget)
    gov.beat(run, step=1, phase=Phase.CANARY)
    gov.report(pod, h200_sample(used_gib=132.5, total_gib=139.0))  # 4.7% free: under 5%...
    gov.tick(1)
    told = gov.beat(run, step=1, phase=Phase.CANARY)
    assert (told.action, told.reason) == (Action.CONTINUE, Reason.CANARY_HOLD)
    with gov.session() as s:
        assert repo.get_run(s, run).headroom_warned  # ...and the warning was told as an event


def h200_sample(used_gib: float, total_gib: float = 141.0) -> GpuSample:
    """An H200 holding `used_gib` of `total_gib`, its one process holding all of it."""
    return replace(
        gpu_sample(used_gib=0),
        name="H200",
        memory_total_bytes=int(total_gib * GIB),
        memory_used_bytes=int(used_gib * GIB),
        memory_free_bytes=int((total_gib - used_gib) * GIB),
        processes=(GpuProcess(4100, int(used_gib * GIB)),),
    )


def test_an_operator_releases_a_canary_only_on_a_peak_that_fits(gov: Governor) -> None:
    budget = gov.budget("500")
    held, _, run = held_run(gov, budget)
    with gov.session() as s, pytest.raises(Conflict, match=r"135\.0 GiB .* over .* 132\.7 GiB"):
        admission.release_by_operator(
            s, budget, held.id, 135.0, "nvidia-smi", gov.clock.now(), by=BY
        )
    with gov.session() as s:
        admission.release_by_operator(
            s, budget, held.id, 120.0, "nvidia-smi", gov.clock.now(), by=BY
        )
    assert gov.beat(run, step=1, phase=Phase.TRAINING).reason is None
    gov.tick(1)
    assert gov.beat(run, step=2, phase=Phase.TRAINING).action is Action.CONTINUE
