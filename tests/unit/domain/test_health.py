"""Training-health rules and their running statistics, beat by beat."""

import math
import random

import pytest

from governor.domain.health import (
    MAX_WINDOW,
    Goal,
    HealthRule,
    Kind,
    Measure,
    Response,
    Track,
    number,
    observe,
    rules_for,
    spread,
)
from governor.domain.model import Reason


def feed(rules, values, name="m"):
    """Every finding over a sequence of beats, as (beat, action, rule kind)."""
    state, fired = None, []
    for beat, value in enumerate(values):
        state, found = observe(rules, state, {name: value}, beat)
        fired += [(beat, f.action, f.rule.kind, f) for f in found]
    return state, fired


def test_track_keeps_a_bounded_window_its_minimum_and_best() -> None:
    track = Track()
    for value in (5.0, 3.0, 4.0, 1.0, 2.0):
        track = track.seen(value, window=3)
    assert track.recent == (4.0, 1.0, 2.0)
    assert (track.minimum, track.best, track.since_best) == (1.0, 1.0, 1)
    higher = Track()
    for value in (1.0, 3.0, 2.0):
        higher = higher.seen(value, window=3, goal=Goal.MAX)
    assert (higher.best, higher.since_best) == (3.0, 1)
    assert Track.of(track.as_dict()) == track


def test_spread_is_the_population_variance_or_the_range() -> None:
    assert spread([1.0, 3.0], Measure.VARIANCE) == 1.0
    assert spread([1.0, 3.0, 2.0], Measure.RANGE) == 2.0


def test_number_reads_the_agreed_non_finite_strings_and_nothing_else() -> None:
    assert math.isnan(number("NaN") or 0.0)
    assert number("Infinity") == math.inf and number("-Infinity") == -math.inf
    assert number(3) == 3.0 and number("nan") is None and number(True) is None


def test_flatline_warns_at_half_the_window_then_acts_once_with_the_window_of_values() -> None:
    rule = HealthRule(Kind.FLATLINE, "m", Response.STOP, window=10, threshold=1e-6)
    values = [0.1 * (i % 3) for i in range(6)] + [0.0] * 30
    _, fired = feed([rule], values)
    assert [(b, a) for b, a, _, _ in fired] == [(10, Response.WARN), (15, Response.STOP)]
    stop = fired[-1][3]
    assert stop.evidence["values"] == [0.0] * 10
    assert stop.reason is Reason.FLATLINE


def test_flatline_fires_again_only_after_the_metric_moves() -> None:
    rule = HealthRule(Kind.FLATLINE, "m", Response.WARN, window=4, threshold=1e-6)
    _, fired = feed([rule], [1.0] * 8 + [2.0, 5.0] + [3.0] * 4)
    assert [b for b, *_ in fired] == [3, 13]


def test_range_measure() -> None:
    rule = HealthRule(Kind.FLATLINE, "m", Response.WARN, 4, threshold=0.5, measure=Measure.RANGE)
    _, fired = feed([rule], [1.0, 1.2, 1.4, 1.1])
    assert [b for b, *_ in fired] == [3]


def test_non_finite_acts_at_once_on_nan_or_inf_strings() -> None:
    [rule] = rules_for(None, ())
    assert (rule.kind, rule.metric, rule.action) == (Kind.NON_FINITE, "loss", Response.STOP)
    _, fired = feed([rule], [2.0, 1.5, "NaN", "NaN"], name="loss")
    assert [(b, a) for b, a, _, _ in fired] == [(2, Response.STOP)]
    assert fired[0][3].evidence["values"] == ["NaN"]
    _, fired = feed([rule], [1.0, "-Infinity"], name="loss")
    assert fired[0][3].reason is Reason.NON_FINITE


def test_diverging_needs_the_whole_window_above_k_times_the_running_minimum() -> None:
    rule = HealthRule(Kind.DIVERGING, "loss", Response.CHECKPOINT, window=4, factor=2.0)
    _, fired = feed([rule], [1.0, 0.5, 1.2, 0.6, 1.1, 1.2, 1.3, 1.4, 1.5], name="loss")
    assert [(b, a) for b, a, _, _ in fired] == [(5, Response.WARN), (7, Response.CHECKPOINT)]


def test_no_improvement_counts_beats_since_the_best() -> None:
    rule = HealthRule(Kind.NO_IMPROVEMENT, "acc", Response.WARN, window=3, goal=Goal.MAX)
    _, fired = feed([rule], [0.1, 0.2, 0.2, 0.1, 0.15, 0.3, 0.3], name="acc")
    assert [b for b, *_ in fired] == [4]


def test_a_run_rule_replaces_the_servers_and_the_default_of_the_same_kind_and_metric() -> None:
    server = (HealthRule(Kind.FLATLINE, "reward_std", Response.WARN),)
    run = (
        HealthRule(Kind.NON_FINITE, "loss", Response.WARN),
        HealthRule(Kind.FLATLINE, "reward_std", Response.STOP),
    )
    chosen = rules_for(run, server)
    assert [(r.kind, r.action) for r in chosen] == [
        (Kind.NON_FINITE, Response.WARN),
        (Kind.FLATLINE, Response.STOP),
    ]
    assert HealthRule.of({"kind": "flatline", "metric": "x", "window": 10_000}).window == MAX_WINDOW
    assert HealthRule.of(run[1].as_dict()) == run[1]


def test_metrics_without_the_watched_name_leave_the_state_alone() -> None:
    rule = HealthRule(Kind.FLATLINE, "m", Response.WARN, window=4)
    state, found = observe([rule], None, {"other": 1.0, "m": "text"}, 1)
    assert (state, found) == ({}, [])


def healthy_runs(seed: int) -> dict[str, list[float]]:
    """Metrics of a training run that is fine: noisy, decaying, scheduled."""
    rng = random.Random(seed)
    beats = 600
    walk, reward = [], 0.0
    for _ in range(beats):
        reward += rng.gauss(0, 0.05)
        walk.append(reward)
    return {
        "loss": [2.0 * math.exp(-t / 150) + 0.4 + rng.gauss(0, 0.03) for t in range(beats)],
        "reward_mean": walk,
        "reward_variance": [0.2 + abs(rng.gauss(0, 0.05)) for _ in range(beats)],
        "learning_rate": [
            3e-4 * min(1.0, t / 50) * (0.55 + 0.45 * math.cos(2 * math.pi * t / 200))
            for t in range(beats)
        ],
        "grad_norm": [abs(rng.gauss(1.0, 0.3)) + 0.05 for _ in range(beats)],
    }


RULES = (
    HealthRule(Kind.NON_FINITE, "loss", Response.STOP),
    HealthRule(Kind.NON_FINITE, "grad_norm", Response.STOP),
    HealthRule(Kind.FLATLINE, "reward_variance", Response.STOP, window=20, threshold=1e-6),
    HealthRule(Kind.FLATLINE, "reward_mean", Response.STOP, window=20, threshold=1e-6),
    HealthRule(Kind.FLATLINE, "learning_rate", Response.WARN, window=20, threshold=1e-16),
    HealthRule(Kind.DIVERGING, "loss", Response.STOP, window=20, factor=2.0),
    HealthRule(Kind.DIVERGING, "grad_norm", Response.STOP, window=20, factor=50.0),
    HealthRule(Kind.NO_IMPROVEMENT, "loss", Response.STOP, window=200),
)


@pytest.mark.parametrize("seed", range(25))
def test_healthy_noisy_metrics_never_trigger(seed: int) -> None:
    series = healthy_runs(seed)
    state = None
    for beat in range(600):
        metrics = {name: values[beat] for name, values in series.items()}
        state, found = observe(RULES, state, metrics, beat)
        assert found == [], (seed, beat, [f.message for f in found])


@pytest.mark.parametrize("seed", range(5))
def test_the_same_rules_catch_a_collapse_in_the_same_noise(seed: int) -> None:
    series = healthy_runs(seed)
    series["reward_variance"][300:] = [0.0] * 300
    state, kinds = None, []
    for beat in range(600):
        metrics = {name: values[beat] for name, values in series.items()}
        state, found = observe(RULES, state, metrics, beat)
        kinds += [(f.rule.metric, f.action) for f in found]
    assert kinds == [("reward_variance", Response.WARN), ("reward_variance", Response.STOP)]
