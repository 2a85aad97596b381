"""How far past its ceiling the cloud bills each of 1,000 simulated pilots, and why.

Every pilot is one budget, one pod and one run, set up through the services and governed by
the real scheduler tasks in-process, on one database and one simulated clock shared by all.
A pilot's script is drawn from --seed: an hourly rate ($1-$40/h); a ceiling placed so that
committed spend reaches it 20-150 s after the start (the sim runs minutes, not days: the
overshoot is the rate times the seconds billed past the ceiling, whatever the ceiling); a
heartbeat interval (5-60 s, with jitter and lost beats for some), timeout and checkpoint
grace; a job that saves and acknowledges a stop after a while (or never), and sometimes
crashes or finishes first. The pilots share --providers simulated providers (fake clouds,
BillingFakeProvider, each of one region), pilot i on provider i mod --providers, each
provider's pilots one after another in index order: a pilot starts when the one before it
on its provider has stopped, so every provider's history of stops is shared by its pilots,
and the governor learns each provider's stop latency from it (from its latest stops, once
there are five: their 95th percentile, or, where any was refused, at least the worst retry
sequence they have shown). A provider declares a stop latency (what the governor
is told at registration); its real stops are shorter, or, for some providers, longer; the
stop calls of some providers fail retryably a few times. Pods have no storage, budgets no
reserve and no storage tail: nothing but the governor's own margin (checkpoint grace + stop
latency in force + reaction time) stands between a pod's compute and its ceiling.

The loop is event-driven: jobs check in at their own instants; every enforce interval (5 s)
each task in governor.scheduler.tasks.TASKS that is due runs, as the daemon's scheduler would
run it. It ends when every pod is stopped. A pilot's overshoot is what its cloud billed (its
own clock, compute until the stop completed) minus the ceiling, clipped at 0, attributed to
its CAUSE: "provider stop slower than declared", "stop failed and retried", or "none" (the
provider kept its word: any overshoot there is the governor's own), and to whether it came
during its provider's warm-up (its first five stops, before a learned figure exists) or
after; beside it, the median money left unspent at the stop (ceiling minus bill), the price
of the margin. Beside the governor, the same
scripts under a BASELINE that acts only on lagged bills: it polls the provider's bill every
enforce interval and stops the pod once the bill, billing-lag behind, shows the ceiling.

    .venv/bin/python bench/overshoot.py                   # 1,000 pilots on SQLite
    .venv/bin/python bench/overshoot.py --quick           # 20 pilots on 3 providers
    .venv/bin/python bench/overshoot.py --pilots 200 --seed 7 --db postgres --each

One JSON line per cause and per policy on stdout (with --each, one per pilot too), then a
summary; progress on stderr.
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_UP, Decimal
from enum import StrEnum
from typing import Any

from fleet import (
    SimClock,
    build_context,
    check_in,
    emit,
    exit_cleanly_on_sigterm,
    progress,
    quiet_event_log,
    scratch_database,
)
from server_process import DEFAULT_ADMIN_URL
from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.engine import unit_of_work
from governor.domain.model import Action, PodState, RunStatus
from governor.domain.money import ZERO, charge
from governor.domain.stop_latency import MIN_STOPS
from governor.fakes.cloud import BillingFakeProvider
from governor.scheduler.tasks import TASKS
from governor.services.context import GovernorConfig
from governor.services.fleet import budgets, pods
from governor.services.jobs.checkins import Checkpoint, Directive, Heartbeat
from governor.services.runs import lifecycle

BENCH = "overshoot"
DEFAULT_SEED = 20260101
DEFAULT_PILOTS = 1000
QUICK_PILOTS = 20
DEFAULT_PROVIDERS = 20
QUICK_PROVIDERS = 3
MAX_SIMULATED_S = 6 * 3600.0  # a pod still running by then is reported as never stopped

# What a pilot's script is drawn from.
RATE_USD_PER_H = (1.0, 40.0)
RUNUP_S = (20.0, 150.0)  # from the start until committed spend reaches the ceiling
HEARTBEAT_S = (5.0, 60.0)
TIMEOUT_PER_INTERVAL = (2.5, 6.0)
GRACE_S = (10.0, 90.0)
DECLARED_LATENCY_S = (5.0, 45.0)
WITHIN_LATENCY = (0.3, 1.0)  # real latency as a share of the declared one
SLOWER_SHARE, SLOWER_LATENCY = 0.15, (1.2, 2.5)
FAILING_SHARE, FAILURES = 0.15, (1, 4)
ASKS_TO_WAIT_SHARE, RETRY_AFTER_S = 0.5, (2.0, 20.0)  # of the failing ones: Retry-After
BILLING_LAG_S = (60.0, 3600.0)
LOSSY_SHARE, DROP_CHANCE = 0.2, (0.1, 0.5)
JITTERY_SHARE, JITTER = 0.3, (0.1, 0.5)  # a late beat: up to this share of the interval
NEVER_SAVES_SHARE = 0.1
SAVE_PER_GRACE = (0.1, 1.5)  # time to save, as a share of the checkpoint grace
CRASH_SHARE = 0.1
FINISH_SHARE = 0.1
ENDS_PER_RUNUP = (0.2, 1.2)  # when a crash or a finish comes, as a share of the run-up
STEPS_PER_S = 2.0


class Cause(StrEnum):
    """What the pilot's provider did that the governor was not told: a stop slower than the
    declared latency (whether or not calls failed too), else failed stop calls, else none."""

    NONE = "none"
    FAILED = "stop failed and retried"
    SLOWER = "provider stop slower than declared"


class Phase(StrEnum):
    """When a pilot's stop came in its provider's history: among the first MIN_STOPS (no
    learned figure yet), or after them."""

    WARM_UP = "during warm-up"
    LEARNED = "after warm-up"


class Policy(StrEnum):
    GOVERNOR = "governor"
    LAGGED_BILL = "lagged_bill"


@dataclass(frozen=True)
class Script:
    """One pilot, as drawn from the seed: its cloud, its job and its ceiling."""

    index: int
    provider: str
    turn: int  # its place among its provider's pilots: they run one after another
    rate_usd_per_h: Decimal
    ceiling_usd: Decimal
    heartbeat_s: float
    heartbeat_timeout_s: float
    checkpoint_grace_s: float
    declared_latency_s: float
    real_latency_s: float
    stop_failures: int
    retry_after_s: float | None
    billing_lag_s: float
    drop_chance: float
    jitter: float
    save_s: float | None  # None: never acknowledges a stop
    crash_at_s: float | None
    finish_at_s: float | None
    first_beat_s: float

    @property
    def cause(self) -> Cause:
        if self.real_latency_s > self.declared_latency_s:
            return Cause.SLOWER
        if self.stop_failures:
            return Cause.FAILED
        return Cause.NONE

    @property
    def phase(self) -> Phase:
        return Phase.WARM_UP if self.turn < MIN_STOPS else Phase.LEARNED

    @property
    def ref(self) -> str:
        return f"pilot-{self.index}"


@dataclass(frozen=True)
class Cloud:
    """One simulated provider: the stop latency it declares, and how its stops go."""

    name: str
    declared_latency_s: float
    slower: bool  # its stops take longer than it declares
    failing: bool  # its stop calls fail a few times before one is taken


def draw_clouds(count: int, seed: int) -> list[Cloud]:
    """`count` providers, SLOWER_SHARE of them slower than declared and FAILING_SHARE of them
    failing (rounded, at least one each where there are three), drawn apart from the pilots
    so that a pilot's own draws do not depend on how many providers there are."""
    rng = random.Random(seed * 7 + 1)
    slower = max(round(count * SLOWER_SHARE), 1 if count >= 3 else 0)
    failing = max(round(count * FAILING_SHARE), 1 if count >= 3 else 0)
    kinds = ["slower"] * slower + ["failing"] * failing
    kinds += ["keeps its word"] * (count - len(kinds))
    rng.shuffle(kinds)
    return [
        Cloud(
            f"fake-{index:03d}",
            round(rng.uniform(*DECLARED_LATENCY_S), 3),
            kind == "slower",
            kind == "failing",
        )
        for index, kind in enumerate(kinds)
    ]


def draw_scripts(count: int, seed: int, reaction_s: float, clouds: list[Cloud]) -> list[Script]:
    """`count` pilots, pilot i on clouds[i mod len(clouds)]; the same seed always draws the
    same pilots."""
    rng = random.Random(seed)
    return [_draw(rng, index, reaction_s, clouds) for index in range(count)]


def _draw(rng: random.Random, index: int, reaction_s: float, clouds: list[Cloud]) -> Script:
    cloud = clouds[index % len(clouds)]
    # Every number is drawn whether it is used or not, so each pilot uses the same draws.
    rate = Decimal(f"{rng.uniform(*RATE_USD_PER_H):.2f}")
    runup = rng.uniform(*RUNUP_S)
    interval = rng.uniform(*HEARTBEAT_S)
    timeout = interval * rng.uniform(*TIMEOUT_PER_INTERVAL)
    grace = rng.uniform(*GRACE_S)
    rng.uniform(*DECLARED_LATENCY_S)  # each provider declares its own
    rng.random()  # whether the provider is slower is the provider's
    slower_by = rng.uniform(*SLOWER_LATENCY)
    within_by = rng.uniform(*WITHIN_LATENCY)
    rng.random()  # whether it fails is the provider's
    failures = rng.randint(*FAILURES)
    asks, retry_after = rng.random() < ASKS_TO_WAIT_SHARE, rng.uniform(*RETRY_AFTER_S)
    lag = rng.uniform(*BILLING_LAG_S)
    lossy, drop = rng.random() < LOSSY_SHARE, rng.uniform(*DROP_CHANCE)
    jittery, jitter = rng.random() < JITTERY_SHARE, rng.uniform(*JITTER)
    saves, save = rng.random() >= NEVER_SAVES_SHARE, grace * rng.uniform(*SAVE_PER_GRACE)
    ending, ends_at = rng.random(), runup * rng.uniform(*ENDS_PER_RUNUP)
    first_beat = rng.uniform(0.0, interval)
    declared, slower, failing = cloud.declared_latency_s, cloud.slower, cloud.failing
    margin_s = grace + declared + reaction_s
    ceiling = (rate * Decimal(str((runup + margin_s) / 3600))).quantize(
        Decimal("0.01"), rounding=ROUND_UP
    )
    return Script(
        index=index,
        provider=cloud.name,
        turn=index // len(clouds),
        rate_usd_per_h=rate,
        ceiling_usd=ceiling,
        heartbeat_s=interval,
        heartbeat_timeout_s=round(timeout, 3),
        checkpoint_grace_s=round(grace, 3),
        declared_latency_s=declared,
        real_latency_s=round(declared * (slower_by if slower else within_by), 3),
        stop_failures=failures if failing else 0,
        retry_after_s=round(retry_after, 3) if failing and asks else None,
        billing_lag_s=lag,
        drop_chance=drop if lossy else 0.0,
        jitter=jitter if jittery else 0.0,
        save_s=save if saves else None,
        crash_at_s=ends_at if ending < CRASH_SHARE else None,
        finish_at_s=ends_at if CRASH_SHARE <= ending < CRASH_SHARE + FINISH_SHARE else None,
        first_beat_s=first_beat,
    )


@dataclass
class Job:
    """A pilot's training job as the simulation drives it."""

    script: Script
    cloud: BillingFakeProvider
    rng: random.Random  # its own: lost and late beats do not depend on the others
    started_s: float | None = None  # None: waiting for its turn on its provider
    budget_id: str = ""
    pod_id: str = ""
    run_id: str = ""
    saving: bool = False  # told to stop; will acknowledge once saved
    checkpointing: bool = False  # asked for a checkpoint; will send it once saved
    gone: bool = False  # the job has exited (acknowledged, finished, crashed, machine off)


class Event(StrEnum):
    BEAT = "beat"
    ACK = "ack"  # saved after a stop: acknowledge it with the checkpoint
    CHECKPOINT = "checkpoint"  # saved after a checkpoint request


@dataclass(frozen=True)
class Outcome:
    script: Script
    policy: Policy
    billed_usd: Decimal
    stopped_after_s: float | None  # None: still running when the simulation gave up
    reason: str | None = None  # why the governor stopped the pod
    metered_usd: Decimal | None = None  # what the governor counted as spent at the end

    @property
    def overshoot_usd(self) -> Decimal:
        return max(ZERO, self.billed_usd - self.script.ceiling_usd)

    @property
    def unspent_usd(self) -> Decimal:
        """What the margin left unspent: the ceiling less what the cloud billed (0 if past)."""
        return max(ZERO, self.script.ceiling_usd - self.billed_usd)

    @property
    def overshoot_s(self) -> float:
        """Seconds billed past the ceiling, at the pod's rate."""
        return float(self.overshoot_usd / self.script.rate_usd_per_h * 3600)

    @property
    def headroom_s(self) -> float:
        """Seconds the pod could still have billed before its ceiling (negative: past it)."""
        return float(
            (self.script.ceiling_usd - self.billed_usd) / self.script.rate_usd_per_h * 3600
        )


class Simulation:
    """All pilots in one database under one clock, driven by events and scheduler passes."""

    def __init__(
        self,
        url: str,
        scripts: list[Script],
        clouds: list[Cloud],
        seed: int,
        config: GovernorConfig,
    ) -> None:
        self.clock = SimClock()
        self.config = config
        self.clouds = {
            c.name: BillingFakeProvider(self.clock, stop_latency_s=c.declared_latency_s)
            for c in clouds
        }
        self.jobs = [
            Job(
                script, self.clouds[script.provider], random.Random(seed * 1_000_003 + script.index)
            )
            for script in scripts
        ]
        self.ctx = build_context(url, self.clock, self.clouds, config)
        self.queue: list[tuple[float, int, Event, int]] = []
        self.serial = 0
        self.passes = 0
        # each provider's pilots, in their turn: the next starts once the one before stopped
        self.waiting = {
            c.name: [j for j in self.jobs if j.script.provider == c.name] for c in clouds
        }

    def close(self) -> None:
        self.ctx.engine.dispose()

    # Setting up ---------------------------------------------------------------------------

    def start_next(self, provider: str, at: float) -> Job | None:
        """The provider's next pilot, set up through the services now; None: none left."""
        if not self.waiting[provider]:
            return None
        job = self.waiting[provider].pop(0)
        s, cloud = job.script, job.cloud
        # How this stop of the provider's will go: the governor was told the declared latency
        # at registration; the cloud behind the adapter takes its real one.
        cloud.hourly_rate_usd = s.rate_usd_per_h  # what a pod first seen now bills
        cloud.stop_takes_s = s.real_latency_s
        cloud.stop_failures, cloud.retry_after_s = s.stop_failures, s.retry_after_s
        cloud.billing_lag_s = s.billing_lag_s
        now = self.clock.now()
        with unit_of_work(self.ctx.sessions) as session:
            self._set_up_pilot(session, job, now)
        job.started_s = at
        self._push(at + s.first_beat_s, Event.BEAT, job)
        return job

    def _set_up_pilot(self, session: Session, job: Job, now: datetime) -> None:
        s = job.script
        declaration = budgets.Declaration(f"pilot-{s.index}", s.ceiling_usd)
        job.budget_id = budgets.declare(session, declaration, now).id
        registration = pods.Registration(s.provider, s.ref, gpu_type="H100", gpu_count=1)
        job.pod_id = pods.register(session, self.ctx, job.budget_id, registration, now).id
        spec = lifecycle.RunSpec(
            "train", job.pod_id, None, s.heartbeat_timeout_s, s.checkpoint_grace_s
        )
        job.run_id = lifecycle.create(session, self.ctx.config, job.budget_id, spec, now)[0].id

    # Running ------------------------------------------------------------------------------

    def run(self) -> float:
        """Until every pod is stopped (or MAX_SIMULATED_S); returns the simulated seconds."""
        interval = self.config.enforce_interval_s
        due = {name: task.interval_s(self.ctx) for name, task in TASKS.items()}
        live = [job for name in self.clouds if (job := self.start_next(name, 0.0))]
        next_pass = interval
        started = time.perf_counter()
        while live and next_pass <= MAX_SIMULATED_S:
            if self.queue and self.queue[0][0] < next_pass:
                at, _, event, index = heapq.heappop(self.queue)
                self.clock.move_to(at)
                self._handle(event, self.jobs[index], at)
                continue
            self.clock.move_to(next_pass)
            for name, task in TASKS.items():
                if due[name] <= next_pass:
                    task.run(self.ctx)
                    due[name] += task.interval_s(self.ctx)
            self.passes += 1
            still = [job for job in live if not self._machine_off(job)]
            for job in live:
                if job not in still and (after := self.start_next(job.script.provider, next_pass)):
                    still.append(after)
            live = still
            if self.passes % 200 == 0:
                left = len(live) + sum(len(w) for w in self.waiting.values())
                progress(
                    f"  simulated {next_pass:6.0f} s: {left} pilots not yet stopped "
                    f"({time.perf_counter() - started:.0f} s)"
                )
            next_pass += interval
        return self.clock.elapsed_s()

    def _push(self, at: float, event: Event, job: Job) -> None:
        self.serial += 1
        heapq.heappush(self.queue, (at, self.serial, event, job.script.index))

    def _machine_off(self, job: Job) -> bool:
        return job.cloud.describe(job.script.ref).state is PodState.STOPPED

    def _handle(self, event: Event, job: Job, at: float) -> None:
        s = job.script
        if job.gone:
            return
        since_start = at - (job.started_s or 0.0)
        if self._machine_off(job) or (s.crash_at_s is not None and since_start >= s.crash_at_s):
            job.gone = True  # the machine is off, or the job died without a word
            return
        if event is Event.ACK:
            checkpoint = Checkpoint(self._step(at), f"/workspace/ckpt-{self._step(at)}")
            self._beat(job, at, RunStatus.STOPPING, checkpoint)
            job.gone = True  # saved and acknowledged: the job exits
        elif event is Event.CHECKPOINT:
            checkpoint = Checkpoint(self._step(at), f"/workspace/ckpt-{self._step(at)}")
            job.checkpointing = False
            self._follow(job, self._beat(job, at, RunStatus.RUNNING, checkpoint), at)
        elif s.finish_at_s is not None and since_start >= s.finish_at_s:
            self._beat(job, at, RunStatus.FINISHED)
            job.gone = True
        else:
            if job.rng.random() >= s.drop_chance:
                self._follow(job, self._beat(job, at, RunStatus.RUNNING), at)
            late = s.heartbeat_s * s.jitter * job.rng.random()
            self._push(at + s.heartbeat_s + late, Event.BEAT, job)

    def _step(self, at: float) -> int:
        return int(at * STEPS_PER_S)

    def _beat(
        self, job: Job, at: float, status: RunStatus, checkpoint: Checkpoint | None = None
    ) -> Directive:
        beat = Heartbeat(step=self._step(at), status=status, checkpoint=checkpoint)
        return check_in(self.ctx, job.run_id, beat, self.clock.now())

    def _follow(self, job: Job, directive: Directive, at: float) -> None:
        """What the job does with its directive: save, then acknowledge or report it."""
        save_s = job.script.save_s
        if save_s is None:
            return
        if directive.action is Action.STOP and not job.saving:
            job.saving = True
            self._push(at + save_s, Event.ACK, job)
        elif directive.action is Action.CHECKPOINT and not (job.checkpointing or job.saving):
            job.checkpointing = True
            self._push(at + save_s, Event.CHECKPOINT, job)

    # Reading the results ------------------------------------------------------------------

    def outcomes(self) -> list[Outcome]:
        now = self.clock.now()
        results = []
        with unit_of_work(self.ctx.sessions) as session:
            for job in self.jobs:
                if job.started_s is None:  # its turn never came: the simulation gave up
                    results.append(Outcome(job.script, Policy.GOVERNOR, ZERO, None))
                    continue
                pod = job.cloud.state.pods[job.script.ref]
                order = repo.latest_stop_order(session, job.pod_id)
                book = budgets.book(session, self.config, job.budget_id, now)
                stopped = pod.stopped_at is not None and pod.state(now) is PodState.STOPPED
                results.append(
                    Outcome(
                        job.script,
                        Policy.GOVERNOR,
                        pod.bill_usd(now),
                        _seconds_between(pod.started_at, pod.stopped_at) if stopped else None,
                        None if order is None else order.reason.value,
                        book.figures.spent,
                    )
                )
        return results


def _seconds_between(start: str, end: str | None) -> float | None:
    if end is None:
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def lagged_bill_outcome(s: Script, poll_s: float) -> Outcome:
    """The baseline: stop once the provider's bill, `billing_lag_s` behind, shows the ceiling.

    It looks every `poll_s`; a failed stop call is tried again at the next look, or once
    the provider's Retry-After has passed; the stop then takes the provider's real latency.
    """
    reached_s = float(s.ceiling_usd / s.rate_usd_per_h * 3600)
    acted_s = math.ceil((reached_s + s.billing_lag_s) / poll_s) * poll_s
    for _ in range(s.stop_failures):
        wait = max(poll_s, s.retry_after_s or 0.0)
        acted_s += math.ceil(wait / poll_s) * poll_s
    stopped_s = acted_s + s.real_latency_s
    return Outcome(s, Policy.LAGGED_BILL, charge(s.rate_usd_per_h, stopped_s), stopped_s)


def _money(amount: Decimal) -> float:
    return float(round(amount, 6))


def _median(amounts: list[Decimal]) -> Decimal | None:
    return statistics.median(amounts) if amounts else None


def aggregate(outcomes: list[Outcome], **labels: Any) -> dict[str, Any]:
    over = [o for o in outcomes if o.overshoot_usd > 0]
    unspent = _median([o.unspent_usd for o in outcomes])
    return {
        "bench": BENCH,
        **labels,
        "pilots": len(outcomes),
        "overshooting": len(over),
        "total_overshoot_usd": _money(sum((o.overshoot_usd for o in outcomes), ZERO)),
        "max_overshoot_usd": _money(max((o.overshoot_usd for o in outcomes), default=ZERO)),
        "max_overshoot_s": round(max((o.overshoot_s for o in outcomes), default=0.0), 3),
        "min_headroom_s": round(min(o.headroom_s for o in outcomes), 3) if outcomes else None,
        "never_stopped": sum(1 for o in outcomes if o.stopped_after_s is None),
        "median_unspent_usd": None if unspent is None else _money(unspent),
    }


def records(policy: Policy, outcomes: list[Outcome], **extra: Any) -> Iterator[dict[str, Any]]:
    """One record per cause, and per cause and phase (each, even with no pilots), then the
    policy's own."""
    for cause in Cause:
        mine = [o for o in outcomes if o.script.cause is cause]
        yield aggregate(mine, record="cause", policy=policy.value, cause=cause.value)
        for phase in Phase:
            ours = [o for o in mine if o.script.phase is phase]
            yield aggregate(
                ours, record="phase", policy=policy.value, cause=cause.value, phase=phase.value
            )
    yield aggregate(outcomes, record="policy", policy=policy.value, **extra)


def pilot_record(o: Outcome) -> dict[str, Any]:
    s = o.script
    return {
        "bench": BENCH,
        "record": "pilot",
        "policy": o.policy.value,
        "pilot": s.index,
        "provider": s.provider,
        "turn": s.turn,
        "cause": s.cause.value,
        "phase": s.phase.value,
        "rate_usd_per_h": float(s.rate_usd_per_h),
        "ceiling_usd": float(s.ceiling_usd),
        "billed_usd": _money(o.billed_usd),
        "overshoot_usd": _money(o.overshoot_usd),
        "overshoot_s": round(o.overshoot_s, 3),
        "unspent_usd": _money(o.unspent_usd),
        "stopped_after_s": o.stopped_after_s,
        "reason": o.reason,
        "metered_usd": None if o.metered_usd is None else _money(o.metered_usd),
        "heartbeat_s": round(s.heartbeat_s, 3),
        "heartbeat_timeout_s": s.heartbeat_timeout_s,
        "checkpoint_grace_s": s.checkpoint_grace_s,
        "declared_latency_s": s.declared_latency_s,
        "real_latency_s": s.real_latency_s,
        "stop_failures": s.stop_failures,
        "retry_after_s": s.retry_after_s,
        "billing_lag_s": round(s.billing_lag_s, 3),
    }


def summary(
    by_policy: dict[Policy, list[Outcome]], reasons: Counter[str], header: str
) -> Iterable[str]:
    yield ""
    yield header
    yield (
        f"  {'policy / cause / phase':<42}{'pilots':>7}{'over':>6}{'total $':>10}{'max $':>8}"
        f"{'max s over':>11}{'min s left':>11}{'median unspent $':>18}"
    )
    for policy, outcomes in by_policy.items():
        rows = [(policy.value, outcomes)]
        for cause in Cause:
            mine = [o for o in outcomes if o.script.cause is cause]
            rows.append((f"  {cause.value}", mine))
            rows += [
                (f"    {phase.value}", [o for o in mine if o.script.phase is phase])
                for phase in Phase
            ]
        for label, mine in rows:
            a = aggregate(mine)
            yield (
                f"  {label:<42}{a['pilots']:>7}{a['overshooting']:>6}"
                f"{a['total_overshoot_usd']:>10.2f}{a['max_overshoot_usd']:>8.2f}"
                f"{a['max_overshoot_s']:>11.1f}{_seconds(a['min_headroom_s']):>11}"
                f"{_dollars(a['median_unspent_usd']):>18}"
            )
    yield "  governor stops by reason: " + ", ".join(
        f"{reason} {count}" for reason, count in reasons.most_common()
    )


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _dollars(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pilots", type=int, default=DEFAULT_PILOTS, help=f"default {DEFAULT_PILOTS}"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help=f"what the pilots are drawn from (default {DEFAULT_SEED}: the same pilots every time)",
    )
    parser.add_argument(
        "--providers",
        type=int,
        default=DEFAULT_PROVIDERS,
        help=f"simulated providers the pilots share (default {DEFAULT_PROVIDERS})",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_PILOTS} pilots on {QUICK_PROVIDERS} providers, for CI",
    )
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument(
        "--postgres-url",
        default=DEFAULT_ADMIN_URL,
        help="an admin connection that may CREATE and DROP a scratch database "
        f"(default {DEFAULT_ADMIN_URL})",
    )
    parser.add_argument("--each", action="store_true", help="also one JSON line per pilot")
    args = parser.parse_args(argv)
    count = QUICK_PILOTS if args.quick else args.pilots
    providers = QUICK_PROVIDERS if args.quick else args.providers
    quiet_event_log()
    exit_cleanly_on_sigterm()
    random.seed(args.seed)  # the governor's retry jitter draws from the global generator

    config = GovernorConfig()
    clouds = draw_clouds(providers, args.seed)
    scripts = draw_scripts(count, args.seed, config.reaction_s, clouds)
    started = time.perf_counter()
    progress(f"{args.db}: {count} pilots on {providers} providers, seed {args.seed}")
    with scratch_database(args.db, args.postgres_url) as url:
        sim = Simulation(url, scripts, clouds, args.seed, config)
        try:
            simulated_s = sim.run()
            governed = sim.outcomes()
            passes = sim.passes
        finally:
            sim.close()
    wall_s = time.perf_counter() - started
    baseline = [lagged_bill_outcome(s, config.enforce_interval_s) for s in scripts]
    by_policy = {Policy.GOVERNOR: governed, Policy.LAGGED_BILL: baseline}
    reasons = Counter(o.reason or "none" for o in governed)

    if args.each:
        for outcome in governed + baseline:
            emit(pilot_record(outcome))
    run_facts = {
        "db": args.db,
        "seed": args.seed,
        "providers": providers,
        "simulated_s": round(simulated_s, 3),
        "passes": passes,
        "wall_s": round(wall_s, 3),
        "stopped_by": dict(reasons),
        "metered_below_billed": sum(
            1 for o in governed if o.metered_usd is not None and o.metered_usd < o.billed_usd
        ),
    }
    for record in records(Policy.GOVERNOR, governed, **run_facts):
        emit(record)
    for record in records(Policy.LAGGED_BILL, baseline, db=args.db, seed=args.seed):
        emit(record)
    header = (
        f"overshoot: {count} pilots on {providers} providers, seed {args.seed}, {args.db}: "
        f"{simulated_s:.0f} s "
        f"simulated in {passes} passes, {wall_s:.0f} s wall"
    )
    print("\n".join(summary(by_policy, reasons, header)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
