"""The policy as a table: each row a situation and what the governor must decide."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from governor.domain.ledger import Figures
from governor.domain.memory_outlook import Projection
from governor.domain.model import Action, OomForesight, Phase, Reason, RunStatus, Severity
from governor.domain.policy import (
    RULES,
    CanaryHold,
    Finding,
    GpuView,
    HealthStop,
    RunView,
    Situation,
    Watch,
    decide,
    evaluate,
    next_heartbeat_s,
)

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
D = Decimal


def money(
    spent: str = "10", committed: str | None = None, ceiling: str = "100", burn: str = "10"
) -> Figures:
    """Committed spend's parts beyond spent all in the shutdown part."""
    shutdown = D(committed or spent) - D(spent)
    return Figures(D(spent), shutdown, D(0), D(0), D(ceiling), D(burn), None)


def run(**kw: object) -> RunView:
    values: dict[str, object] = {
        "status": RunStatus.RUNNING,
        "phase": Phase.TRAINING,
        "phase_since": NOW - timedelta(hours=1),
        "progress_at": NOW - timedelta(seconds=5),
        "step": 100,
        "total_steps": 1000,
        "started_at": NOW - timedelta(hours=1),
        "last_heartbeat_at": NOW - timedelta(seconds=5),
        "heartbeat_timeout_s": 120.0,
        "ended_at": None,
        "steps_per_s": 1.0,
        "checkpoint_asked": False,
        "forecast_warned": True,
    }
    values.update(kw)
    return RunView(**values)  # type: ignore[arg-type]


def situation(**kw: object) -> Situation:
    values: dict[str, object] = {
        "now": NOW,
        "figures": money(),
        "thresholds": (50, 80, 90),
        "alerted_pct": 0,
        "run": run(),
    }
    values.update(kw)
    return Situation(**values)  # type: ignore[arg-type]


def gpu(
    idle_for_s: float | None = 700,
    held_gib: float = 19.5,
    free: float = 0.5,
    fresh: bool = True,
    uuid: str = "GPU-0",
) -> GpuView:
    since = None if idle_for_s is None else NOW - timedelta(seconds=idle_for_s)
    return GpuView(uuid, fresh, since, int(held_gib * 1024**3), free)


def quiet(seconds: float, phase: Phase = Phase.TRAINING, **kw: object) -> RunView:
    return run(progress_at=NOW - timedelta(seconds=seconds), phase=phase, **kw)


CASES = [
    # (id, situation, action, reason or None when nothing fires)
    ("healthy run continues", situation(), Action.CONTINUE, None),
    ("no run, budget fine", situation(run=None), Action.CONTINUE, None),
    ("manual stop", situation(manual_stop=True), Action.STOP, Reason.MANUAL),
    ("committed at ceiling", situation(figures=money("95", "100")), Action.STOP, Reason.CEILING),
    (
        "committed over ceiling, no run",
        situation(run=None, figures=money("99", "120")),
        Action.STOP,
        Reason.CEILING,
    ),
    (
        "committed just under ceiling",
        situation(figures=money("85", "99.99")),
        Action.CHECKPOINT,
        Reason.PRE_STOP,
    ),
    (
        "manual beats ceiling",
        situation(manual_stop=True, figures=money("95", "100")),
        Action.STOP,
        Reason.MANUAL,
    ),
    (
        "heartbeat lost",
        situation(run=run(last_heartbeat_at=NOW - timedelta(seconds=121))),
        Action.STOP,
        Reason.HEARTBEAT_LOST,
    ),
    (
        "heartbeat at the limit is not lost",
        situation(run=run(last_heartbeat_at=NOW - timedelta(seconds=120))),
        Action.CONTINUE,
        None,
    ),
    (
        "silent through an outage: the timeout counts from when jobs could check in again",
        situation(
            run=run(last_heartbeat_at=NOW - timedelta(seconds=600)),
            heard_since=NOW - timedelta(seconds=60),
        ),
        Action.CONTINUE,
        None,
    ),
    (
        "silent for a whole timeout after the outage ended",
        situation(
            run=run(last_heartbeat_at=NOW - timedelta(seconds=600)),
            heard_since=NOW - timedelta(seconds=121),
        ),
        Action.STOP,
        Reason.HEARTBEAT_LOST,
    ),
    (
        "never checked in, past timeout",
        situation(run=run(last_heartbeat_at=None, started_at=NOW - timedelta(seconds=200))),
        Action.STOP,
        Reason.HEARTBEAT_LOST,
    ),
    (
        "silent but finished is not lost",
        situation(
            run=run(
                status=RunStatus.FINISHED,
                last_heartbeat_at=NOW - timedelta(hours=1),
                ended_at=NOW - timedelta(seconds=10),
            )
        ),
        Action.CONTINUE,
        None,
    ),
    (
        "finished, lingered long enough",
        situation(run=run(status=RunStatus.FINISHED, ended_at=NOW - timedelta(seconds=61))),
        Action.STOP,
        Reason.FINISHED,
    ),
    (
        "failed, lingered long enough",
        situation(run=run(status=RunStatus.FAILED, ended_at=NOW - timedelta(seconds=61))),
        Action.STOP,
        Reason.FINISHED,
    ),
    (
        "finished but another run is live",
        situation(
            other_live_runs=1, run=run(status=RunStatus.FINISHED, ended_at=NOW - timedelta(hours=1))
        ),
        Action.CONTINUE,
        None,
    ),
    (
        "pre-stop checkpoint at 90% committed",
        situation(figures=money("80", "90")),
        Action.CHECKPOINT,
        Reason.PRE_STOP,
    ),
    (
        "pre-stop asked once only",
        situation(figures=money("80", "90"), alerted_pct=80, run=run(checkpoint_asked=True)),
        Action.CONTINUE,
        None,
    ),
    (
        "forecast over ceiling warns",
        situation(run=run(forecast_warned=False, steps_per_s=0.01)),
        Action.CONTINUE,
        Reason.FORECAST,
    ),
    (
        "forecast under ceiling is quiet",
        situation(run=run(forecast_warned=False, steps_per_s=10.0)),
        Action.CONTINUE,
        None,
    ),
    (
        "forecast warned once only",
        situation(run=run(forecast_warned=True, steps_per_s=0.01)),
        Action.CONTINUE,
        None,
    ),
    (
        "a health rule asked for a stop",
        situation(run=run(health_stop=HealthStop(Reason.NON_FINITE, "loss is NaN"))),
        Action.STOP,
        Reason.NON_FINITE,
    ),
    (
        "a health stop of a run that has ended",
        situation(
            run=run(
                status=RunStatus.FAILED,
                ended_at=NOW,
                health_stop=HealthStop(Reason.FLATLINE, "flat"),
            )
        ),
        Action.CONTINUE,
        None,
    ),
    ("threshold 50% crossed", situation(figures=money("55")), Action.CONTINUE, Reason.THRESHOLD),
    (
        "threshold already announced",
        situation(figures=money("55"), alerted_pct=50),
        Action.CONTINUE,
        None,
    ),
]


@pytest.mark.parametrize(("name", "s", "action", "reason"), CASES, ids=[c[0] for c in CASES])
def test_policy_decides(name: str, s: Situation, action: Action, reason: Reason | None) -> None:
    decision = decide(evaluate(s))
    if reason is None:
        assert decision is None
    else:
        assert decision is not None
        assert (decision.action, decision.reason) == (action, reason)
        assert decision.message


def test_every_firing_is_reported_in_rule_order() -> None:
    s = situation(figures=money("95", "100"), run=run(forecast_warned=False, steps_per_s=0.01))
    fired = [f.rule for f in evaluate(s)]
    assert fired == ["ceiling", "pre_stop_checkpoint", "forecast_over_ceiling", "thresholds"]
    assert [r.__name__ for r in RULES] == [
        "manual_stop",
        "ceiling",
        "heartbeat_lost",
        "idle_hang",
        "stalled",
        "training_health",
        "canary_over",
        "canary_hold",
        "run_finished",
        "pre_stop_checkpoint",
        "memory_headroom",
        "oom_foreseen",
        "forecast_over_ceiling",
        "thresholds",
    ]


def test_the_strongest_action_wins_then_rule_order() -> None:
    s = situation(
        figures=money("95", "100"),
        run=run(last_heartbeat_at=NOW - timedelta(hours=1)),
    )
    decision = decide(evaluate(s))
    assert decision is not None and decision.reason is Reason.CEILING


def test_ceiling_finding_carries_its_evidence() -> None:
    [finding, *_] = evaluate(situation(figures=money("95.5", "101.25")))
    assert finding.severity is Severity.CRITICAL
    assert finding.evidence["committed_usd"] == "101.25"
    assert finding.evidence["effective_ceiling_usd"] == "100.00"


def test_threshold_reports_the_highest_newly_crossed() -> None:
    [finding] = evaluate(situation(figures=money("91"), alerted_pct=50, run=None))
    assert finding.evidence["threshold_pct"] == 90
    assert finding.severity is Severity.WARNING


def test_an_idle_hang_outranks_a_stall_and_says_what_it_saw() -> None:
    s = situation(run=quiet(1000), gpus=(gpu(700, held_gib=19.5),))
    decision = decide(evaluate(s))
    assert decision is not None and decision.reason is Reason.IDLE_HANG
    assert decision.evidence["held_gib"] == 19.5
    assert "19.5 GiB" in decision.message


def test_per_run_thresholds_apply() -> None:
    s = situation(watch=Watch(idle_window_s=2, idle_util_pct=1), gpus=(gpu(2.5),))
    decision = decide(evaluate(s))
    assert decision is not None and decision.reason is Reason.IDLE_HANG


def test_silence_is_measured_from_creation_when_the_job_never_checked_in() -> None:
    view = replace(run(), last_heartbeat_at=None, started_at=NOW - timedelta(seconds=30))
    assert view.silent_for(NOW) == 30


@pytest.mark.parametrize(
    ("timeout", "to_ceiling", "expected"),
    [
        (120, None, 15.0),  # the default
        (30, None, 10.0),  # a third of the heartbeat timeout
        (120, 20.0, 5.0),  # a quarter of the time left before the stop threshold
        (120, 0.0, 1.0),  # never less than a second
        (1.5, None, 1.0),
    ],
)
def test_next_heartbeat(timeout: float, to_ceiling: float | None, expected: float) -> None:
    assert next_heartbeat_s(timeout, to_ceiling) == expected


def test_a_run_held_to_its_canary_is_stopped_past_it_or_past_its_cap() -> None:
    hold = CanaryHold("arm-a", cap=Decimal("10.00"), spent=Decimal("4.00"), threshold_gib=75.7)
    in_canary = situation(run=run(phase=Phase.CANARY), canary=hold)
    assert [f.rule for f in evaluate(in_canary)] == []
    training = situation(run=run(phase=Phase.TRAINING), canary=hold)
    [finding] = [f for f in evaluate(training) if f.rule == "canary_hold"]
    assert (finding.action, finding.reason) == (Action.STOP, Reason.CANARY_HOLD)
    assert "reports training" in finding.message and "75.7 GiB" in finding.message
    spent = replace(hold, spent=Decimal("10.00"))
    [capped] = [f for f in evaluate(situation(run=run(phase=Phase.CANARY), canary=spent))]
    assert "$10.00 of its $10.00 cap" in capped.message


def test_a_held_canary_may_run_its_eval_batch() -> None:
    hold = CanaryHold("arm-a", cap=Decimal("10.00"), spent=Decimal("4.00"), threshold_gib=75.7)
    assert evaluate(situation(run=run(phase=Phase.EVALUATION), canary=hold)) == []
    assert evaluate(situation(run=run(phase=Phase.CHECKPOINTING), canary=hold)) == []


def test_a_canary_over_its_threshold_is_stopped_with_the_figure() -> None:
    hold = CanaryHold("arm-a", Decimal("10.00"), Decimal("0.40"), 75.7, peak_gib=77.25)
    [over] = evaluate(situation(run=run(phase=Phase.CANARY), canary=hold))
    assert (over.action, over.reason, over.severity) == (
        Action.STOP,
        Reason.CANARY_OVER,
        Severity.CRITICAL,
    )
    assert "77.2 GiB per GPU, over its release threshold of 75.7 GiB" in over.message
    assert over.evidence["peak_gib"] == 77.25 and over.evidence["threshold_gib"] == 75.7
    fits = replace(hold, peak_gib=75.7)
    assert evaluate(situation(run=run(phase=Phase.CANARY), canary=fits)) == []


FORESEEN = Projection(
    gpu="GPU-0",
    projected=82 * 1024**3,
    capacity=80 * 1024**3,
    level=66 * 1024**3,
    step=8,
    steps_ahead=4,
    growth_per_step=2 * 1024**3,
    jump=8 * 1024**3,
    jump_at="evaluation",
    event_every=4,
)


@pytest.mark.parametrize(
    ("foresight", "action"),
    [
        (OomForesight.WARN, Action.CONTINUE),
        (OomForesight.CHECKPOINT, Action.CHECKPOINT),
        (OomForesight.STOP, Action.STOP),
    ],
)
def test_an_oom_foreseen_does_what_the_runs_policy_says(
    foresight: OomForesight, action: Action
) -> None:
    s = situation(oom=FORESEEN, watch=Watch(oom_foresight=foresight))
    [found] = evaluate(s)
    assert (found.action, found.reason) == (action, Reason.OOM_FORESEEN)
    assert "the next evaluation in 4 steps (every 4)" in found.message
    assert "to 82.0 GiB, over the 80.0 GiB the card holds" in found.message
    assert found.evidence["projected_gib"] == 82.0 and found.evidence["oom_foresight"] == foresight
    assert evaluate(replace(s, run=run(oom_warned=True))) == []  # told once
    fits = replace(FORESEEN, projected=79 * 1024**3)
    assert evaluate(replace(s, oom=fits)) == []


def idle_findings(s: Situation) -> list[Finding]:
    return [f for f in evaluate(s) if f.rule == "idle_hang"]


def test_idle_time_counts_from_the_start_of_the_phase_it_is_judged_in() -> None:
    # The GPU has been idle for 700 s, 690 of them compiling: training began 10 s ago.
    just_training = run(phase_since=NOW - timedelta(seconds=10), progress_at=NOW)
    assert idle_findings(situation(run=just_training, gpus=(gpu(700),))) == []
    [warned] = idle_findings(
        situation(
            run=replace(just_training, phase_since=NOW - timedelta(seconds=300)), gpus=(gpu(700),)
        )
    )
    assert (warned.action, warned.evidence["idle_s"]) == (Action.CONTINUE, 300.0)
    [stop] = idle_findings(
        situation(
            run=replace(just_training, phase_since=NOW - timedelta(seconds=600)), gpus=(gpu(700),)
        )
    )
    assert (stop.action, stop.evidence["idle_s"]) == (Action.STOP, 600.0)
    # The GPU went idle after the phase began: its own idle start counts.
    assert idle_findings(situation(run=just_training, gpus=(gpu(5),))) == []
    [since_idle] = idle_findings(
        situation(
            run=replace(just_training, phase_since=NOW - timedelta(hours=1)), gpus=(gpu(400),)
        )
    )
    assert since_idle.evidence["idle_s"] == 400.0


def test_before_any_phase_idle_time_counts_from_the_start_of_the_attempt() -> None:
    fresh = run(phase=None, phase_since=None, started_at=NOW - timedelta(seconds=20))
    assert idle_findings(situation(run=fresh, gpus=(gpu(700),))) == []
    began = replace(fresh, started_at=NOW - timedelta(seconds=650))
    [stop] = idle_findings(situation(run=began, gpus=(gpu(700),)))
    assert (stop.action, stop.evidence["idle_s"]) == (Action.STOP, 650.0)


@pytest.mark.parametrize("phase", [Phase.LOADING, Phase.COMPILING])
def test_while_warming_up_the_idle_rule_warns_without_promising_a_stop(phase: Phase) -> None:
    # Idle for the whole 1000 s of the phase; the compile allowance (1800 s without a step)
    # counts from the attempt's start, 1200 s ago, so the no-progress stop is 600 s away.
    warming = quiet(1200, phase=phase, phase_since=NOW - timedelta(seconds=1000))
    [finding] = idle_findings(situation(run=warming, gpus=(gpu(5000),)))
    assert (finding.action, finding.severity) == (Action.CONTINUE, Severity.WARNING)
    assert "stopped if this lasts" not in finding.message
    assert f"does not stop a job while it is {phase.value}" in finding.message
    assert "no-progress rule stops the pod if no step comes in the next 600 s" in finding.message
    assert "1800 s without a step" in finding.message
    assert finding.evidence["stop_after_s"] == 1800.0
    assert decide(evaluate(situation(run=warming, gpus=(gpu(5000),)))) == finding
    # Warned once; and not before half the idle window of the phase.
    assert (
        idle_findings(situation(run=replace(warming, idle_alerted=True), gpus=(gpu(5000),))) == []
    )
    started = replace(warming, phase_since=NOW - timedelta(seconds=299))
    assert idle_findings(situation(run=started, gpus=(gpu(5000),))) == []


def test_a_resumed_pod_counts_its_idle_time_from_the_resume() -> None:
    resumed = NOW - timedelta(seconds=30)
    assert idle_findings(situation(run=None, resumed_at=resumed, gpus=(gpu(5000),))) == []
    long_ago = NOW - timedelta(seconds=601)
    [stop] = idle_findings(situation(run=None, resumed_at=long_ago, gpus=(gpu(5000),)))
    assert (stop.action, stop.evidence["idle_s"]) == (Action.STOP, 601.0)


FINISHED_LONG_AGO = run(status=RunStatus.FINISHED, ended_at=NOW - timedelta(days=1))


@pytest.mark.parametrize(
    ("resumed_s_ago", "grace_s", "stops"),
    [
        (5, 900, False),  # just resumed: the run's end, a day ago, does not count
        (899, 900, False),
        (900, 900, True),  # the resume grace is over and no run is live
        (30, 0, False),  # never less than the finished linger (60 s)
        (60, 0, True),
    ],
)
def test_a_pod_resumed_after_its_run_finished_waits_the_resume_grace(
    resumed_s_ago: float, grace_s: float, stops: bool
) -> None:
    s = situation(
        run=FINISHED_LONG_AGO,
        resumed_at=NOW - timedelta(seconds=resumed_s_ago),
        resume_grace_s=grace_s,
    )
    decision = decide(evaluate(s))
    if not stops:
        assert decision is None
        return
    assert decision is not None
    assert (decision.action, decision.reason) == (Action.STOP, Reason.FINISHED)
    assert decision.message.startswith(f"The pod was resumed {resumed_s_ago} s ago")
    assert decision.evidence["resume_grace_s"] == grace_s


def test_a_resumed_pod_with_a_live_run_is_not_stopped_as_finished() -> None:
    s = situation(
        run=FINISHED_LONG_AGO,
        resumed_at=NOW - timedelta(hours=1),
        other_live_runs=1,
    )
    assert decide(evaluate(s)) is None


def test_a_run_that_finished_after_the_resume_lingers_as_usual() -> None:
    ended = run(status=RunStatus.FINISHED, ended_at=NOW - timedelta(seconds=61))
    s = situation(run=ended, resumed_at=NOW - timedelta(seconds=100), resume_grace_s=900)
    decision = decide(evaluate(s))
    assert decision is not None and decision.reason is Reason.FINISHED
    assert decision.message.startswith("The run finished 61 s ago")
