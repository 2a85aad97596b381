"""Training-health rules: what a run's own metrics say about the model, beat by beat.

Each rule watches one metric through a small running state (a bounded window of its latest
values, its running minimum and best, how long a condition has held), so judging a beat costs
the same at step 10 and at step 10 million. A rule that keeps holding warns at half its window
(when its action is stronger than a warning) and acts at the full window, once per episode: it
fires again only after its condition has cleared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from statistics import fmean
from typing import Any

from governor.domain.model import Reason

MAX_WINDOW = 256  # beats: bounds each rule's state, so a beat's cost stays constant
NON_FINITE_TEXT = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class Kind(StrEnum):
    FLATLINE = "flatline"  # variance (or range) below a threshold over the window: collapse
    NON_FINITE = "non_finite"  # NaN or Inf
    DIVERGING = "diverging"  # above factor x its running minimum for the whole window
    NO_IMPROVEMENT = "no_improvement"  # no new best for the whole window


class Response(StrEnum):
    WARN = "warn"
    CHECKPOINT = "checkpoint"
    STOP = "stop"


class Measure(StrEnum):
    VARIANCE = "variance"
    RANGE = "range"


class Goal(StrEnum):
    MIN = "min"
    MAX = "max"


REASON_OF = {
    Kind.FLATLINE: Reason.FLATLINE,
    Kind.NON_FINITE: Reason.NON_FINITE,
    Kind.DIVERGING: Reason.DIVERGING,
    Kind.NO_IMPROVEMENT: Reason.NO_IMPROVEMENT,
}


@dataclass(frozen=True)
class HealthRule:
    kind: Kind
    metric: str
    action: Response = Response.WARN
    window: int = 20  # beats
    threshold: float = 1e-8  # flatline: the variance (or range) under which it is flat
    measure: Measure = Measure.VARIANCE  # flatline
    factor: float = 2.0  # diverging: how many times its running minimum
    goal: Goal = Goal.MIN  # no_improvement: whether lower or higher is better

    @property
    def key(self) -> str:
        return f"{self.kind.value}:{self.metric}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "metric": self.metric,
            "action": self.action.value,
            "window": self.window,
            "threshold": self.threshold,
            "measure": self.measure.value,
            "factor": self.factor,
            "goal": self.goal.value,
        }

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> HealthRule:
        return cls(
            kind=Kind(raw["kind"]),
            metric=str(raw["metric"]),
            action=Response(raw.get("action", Response.WARN)),
            window=min(MAX_WINDOW, int(raw.get("window", 20))),
            threshold=float(raw.get("threshold", 1e-8)),
            measure=Measure(raw.get("measure", Measure.VARIANCE)),
            factor=float(raw.get("factor", 2.0)),
            goal=Goal(raw.get("goal", Goal.MIN)),
        )


ALWAYS = (HealthRule(Kind.NON_FINITE, "loss", Response.STOP, window=1),)


def rules_for(
    run_rules: Sequence[HealthRule] | None, server_rules: Sequence[HealthRule]
) -> tuple[HealthRule, ...]:
    """A run's rules: `non_finite` on `loss` always, the server's defaults, then the run's
    own; a later rule of the same kind on the same metric replaces an earlier one."""
    chosen: dict[str, HealthRule] = {}
    for rule in (*ALWAYS, *server_rules, *(run_rules or ())):
        chosen[rule.key] = rule
    return tuple(chosen.values())


@dataclass(frozen=True)
class Track:
    """One rule's running statistics over its metric: constant size, updated per value."""

    recent: tuple[float, ...] = ()  # the latest `window` finite values, oldest first
    minimum: float | None = None  # the lowest finite value ever seen
    best: float | None = None
    since_best: int = 0  # beats since the best was last improved
    streak: int = 0  # consecutive beats the rule's condition has held
    warned: bool = False  # this episode
    acted: bool = False  # this episode

    def seen(self, value: float, window: int, goal: Goal = Goal.MIN) -> Track:
        """The statistics after one more finite value."""
        better = (
            self.best is None
            or (goal is Goal.MIN and value < self.best)
            or (goal is Goal.MAX and value > self.best)
        )
        return replace(
            self,
            recent=(*self.recent, value)[-window:],
            minimum=value if self.minimum is None else min(self.minimum, value),
            best=value if better else self.best,
            since_best=0 if better else self.since_best + 1,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "recent": list(self.recent),
            "minimum": self.minimum,
            "best": self.best,
            "since_best": self.since_best,
            "streak": self.streak,
            "warned": self.warned,
            "acted": self.acted,
        }

    @classmethod
    def of(cls, raw: Mapping[str, Any] | None) -> Track:
        if not raw:
            return cls()
        return cls(
            recent=tuple(raw.get("recent", ())),
            minimum=raw.get("minimum"),
            best=raw.get("best"),
            since_best=int(raw.get("since_best", 0)),
            streak=int(raw.get("streak", 0)),
            warned=bool(raw.get("warned", False)),
            acted=bool(raw.get("acted", False)),
        )


def spread(values: Sequence[float], measure: Measure) -> float:
    """How far apart the values are: their population variance, or their range."""
    if measure is Measure.RANGE:
        return max(values) - min(values)
    mean = fmean(values)
    return fmean([(v - mean) ** 2 for v in values])


@dataclass(frozen=True)
class HealthFinding:
    rule: HealthRule
    action: Response  # WARN for the early warning of a stronger rule
    message: str
    evidence: dict[str, object] = field(default_factory=dict)

    @property
    def reason(self) -> Reason:
        return REASON_OF[self.rule.kind]


def number(value: object) -> float | None:
    """A metric's value as a float (the JSON strings "NaN", "Infinity", "-Infinity" included);
    None for anything that is not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return NON_FINITE_TEXT.get(value)
    return None


def observe(
    rules: Sequence[HealthRule],
    state: Mapping[str, Any] | None,
    metrics: Mapping[str, object] | None,
    step: int,
) -> tuple[dict[str, Any], list[HealthFinding]]:
    """Judge one beat's metrics: the rules' new state, and what fired on this beat."""
    tracks = dict(state or {})
    findings: list[HealthFinding] = []
    for rule in rules:
        value = number((metrics or {}).get(rule.metric))
        if value is None:
            continue
        track, finding = _judge(rule, Track.of(tracks.get(rule.key)), value, step)
        tracks[rule.key] = track.as_dict()
        if finding is not None:
            findings.append(finding)
    return tracks, findings


def _judge(
    rule: HealthRule, track: Track, value: float, step: int
) -> tuple[Track, HealthFinding | None]:
    if rule.kind is not Kind.NON_FINITE:
        if not math.isfinite(value):
            return track, None  # the non_finite rule's business
        track = track.seen(value, rule.window, rule.goal)
    streak = _streak(rule, track, value)
    least = 2 if rule.kind is Kind.FLATLINE else 1  # one value is flat by itself: no evidence
    if streak < least:
        return replace(track, streak=streak, warned=False, acted=False), None
    track = replace(track, streak=streak)
    window = 1 if rule.kind is Kind.NON_FINITE else rule.window
    shown = [value] if rule.kind is Kind.NON_FINITE else track.recent[-min(streak, window) :]
    evidence: dict[str, object] = {
        "rule": rule.kind.value,
        "metric": rule.metric,
        "step": step,
        "window": window,
        "streak": streak,
        "values": [json_number(v) for v in shown],
    }
    if streak >= window and not track.acted:
        finding = HealthFinding(rule, rule.action, _what(rule, track, value), evidence)
        return replace(track, acted=True, warned=True), finding
    if rule.action is not Response.WARN and streak >= max(least, window // 2) and not track.warned:
        message = (
            f"{_what(rule, track, value)}; the run gets {rule.action.value} "
            f"if this lasts {window} beats."
        )
        return replace(track, warned=True), HealthFinding(rule, Response.WARN, message, evidence)
    return track, None


def _streak(rule: HealthRule, track: Track, value: float) -> int:
    """For how many beats the rule's condition has held, this one included."""
    if rule.kind is Kind.NON_FINITE:
        return track.streak + 1 if not math.isfinite(value) else 0
    if rule.kind is Kind.FLATLINE:  # the length of the flat tail of the values, in beats
        tail = track.recent[-min(track.streak + 1, rule.window) :]
        if len(tail) >= 2 and spread(tail, rule.measure) < rule.threshold:
            return track.streak + 1
        return 1
    if rule.kind is Kind.DIVERGING:
        low = track.minimum
        return track.streak + 1 if low is not None and 0 < low * rule.factor < value else 0
    return track.since_best  # no_improvement


def _what(rule: HealthRule, track: Track, value: float) -> str:
    name = rule.metric
    if rule.kind is Kind.NON_FINITE:
        return f"{name} is {json_number(value)}: the model has diverged numerically"
    if rule.kind is Kind.FLATLINE:
        return (
            f"{name} has flatlined: its {rule.measure.value} has stayed below "
            f"{rule.threshold:g} for {track.streak} beats"
        )
    if rule.kind is Kind.DIVERGING:
        return (
            f"{name} is diverging: above {rule.factor:g} x its running minimum "
            f"{track.minimum:g} for {track.streak} beats (now {value:g})"
        )
    return f"{name} has not improved on its best {track.best:g} for {track.since_best} beats"


def json_number(value: float) -> float | str:
    """A value as JSON can carry it: non-finite ones in the agreed strings."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value
