"""An out-of-memory seen coming (SQLite and PostgreSQL): a run whose memory grows toward the
card, with an eval every 4 steps that jumps 6 GiB over training, hears it before the crossing:
its policy's `oom_foresight: checkpoint` has it told to save first (reason `oom-foreseen`);
the default, `warn`, gives the event with the projection and nothing more."""

from __future__ import annotations

from governor.db import repository as repo
from governor.domain.model import Action, Category, Phase, Reason
from governor.services.jobs import checkins
from governor.services.runs import lifecycle
from tests.integration.conftest import Governor, gpu_sample, register

CROSSING_STEP = 12  # the eval at step 12 would need 74 + 6 = 80 GiB: the whole 80 GiB card


def foreseeing_run(gov: Governor, **policy: str) -> tuple[str, str]:
    budget = gov.budget("500")
    pod = register(gov, budget, None)
    spec = lifecycle.RunSpec("job", pod, 100, 10**6, 20.0, policy=dict(policy) or None)
    with gov.session() as s:
        row, _ = lifecycle.create(s, gov.ctx.config, budget, spec, gov.clock.now())
        return pod, row.id


def train(gov: Governor, pod: str, run: str, step: int) -> checkins.Directive:
    """One step: 50 GiB + 2 GiB a step in training, and every 4 steps an eval 6 GiB over it.
    Returns what the step's first beat heard."""
    heard = gov.beat(run, step=step, phase=Phase.TRAINING)
    gov.report(pod, gpu_sample(used_gib=50 + 2 * step))
    if step % 4 == 0:
        gov.beat(run, step=step, phase=Phase.EVALUATION)
        gov.report(pod, gpu_sample(used_gib=50 + 2 * step + 6))
        gov.beat(run, step=step, phase=Phase.TRAINING)
    gov.tick(10)
    return heard


def test_a_run_that_would_checkpoint_first_is_told_before_the_crossing(gov: Governor) -> None:
    pod, run = foreseeing_run(gov, oom_foresight="checkpoint")
    heard = [train(gov, pod, run, step) for step in range(1, CROSSING_STEP)]
    asked = [(step, d) for step, d in enumerate(heard, start=1) if d.action is Action.CHECKPOINT]
    assert asked, [(d.action, d.reason) for d in heard]
    step, first = asked[0]
    # the eval at step 8 shows the interval: from then on the crossing at 12 is foreseen
    assert (step, first.reason) == (9, Reason.OOM_FORESEEN)
    assert first.message is not None
    assert "the next evaluation in 4 steps (every 4)" in first.message
    assert "to 80.0 GiB, over the 80.0 GiB the card holds" in first.message
    saved = gov.beat(run, step=step, checkpoint=checkins.Checkpoint(step, "/ckpt"))
    assert (saved.action, saved.reason) == (Action.CONTINUE, None)
    gov.tick(10)
    assert gov.beat(run, step=step + 1).action is Action.CONTINUE  # asked once


def test_by_default_a_foreseen_oom_is_an_event_only(gov: Governor) -> None:
    pod, run = foreseeing_run(gov)
    heard = [train(gov, pod, run, step) for step in range(1, CROSSING_STEP)]
    assert all(d.action is Action.CONTINUE for d in heard)
    assert Reason.OOM_FORESEEN in [d.reason for d in heard]
    with gov.session() as s:
        [event] = [
            e
            for e in repo.events(s, category=Category.TELEMETRY, subject=f"run:{run}")
            if e.evidence.get("rule") == "oom_foreseen"
        ]
        assert event.evidence["oom_foresight"] == "warn"
        assert event.evidence["projected_gib"] == 80.0
        assert event.evidence["capacity_gib"] == 80.0
        assert event.evidence["jump_at"] == "evaluation"


def test_a_run_that_would_stop_is_stopped_before_the_crossing(gov: Governor) -> None:
    pod, run = foreseeing_run(gov, oom_foresight="stop")
    heard = [train(gov, pod, run, step) for step in range(1, CROSSING_STEP)]
    stops = [d for d in heard if d.action is Action.STOP]
    assert stops and stops[0].reason is Reason.OOM_FORESEEN
    with gov.session() as s:
        order = repo.latest_stop_order(s, pod)
        assert order is not None and order.reason is Reason.OOM_FORESEEN
