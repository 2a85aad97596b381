"""A simulated cloud for tests, the demo and benchmarks.

Pods appear on first sight, running and billing at one configured rate. A stop takes
`stop_latency_s` (what the cloud declares), or `stop_takes_s` where it is set (a cloud slower
or faster than it says), and keeps the volume; the next `stop_failures` stop calls fail in a
retryable way (asking to wait `retry_after_s`, if set). A pod runs in the region `regions`
names for it, or in none the cloud says. A stopped pod can be resumed: it
runs and bills again from then on, unless the cloud has no capacity for it (the next
`resume_refusals` resumes are refused, as a cloud whose GPUs were taken refuses). A pod
rented in the account from elsewhere (`launch`) is listed with its name, labels and GPUs. A pod
named in `losing` is one whose stop loses its workspace (a container disk and no volume): it
is described so, with the reason given, and its stop loses it. It has no way to terminate
anything, as no preserving provider does. BillingFakeProvider also says
what it has billed. With a state file the cloud outlives the process, as a real one would.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from governor.domain.model import PodState
from governor.domain.money import usd
from governor.domain.ports import (
    Billed,
    CallOutcome,
    CallResult,
    Clock,
    Listed,
    PodDescription,
    Seen,
    spelled,
)
from governor.fakes.http_cloud import bill_runs


@dataclass
class FakePod:
    ref: str
    hourly_rate_usd: str
    started_at: str
    stop_requested_at: str | None = None
    stopped_at: str | None = None
    stop_calls: int = 0
    earlier_runs: list[list[str]] = field(default_factory=list)  # [from, until] before a resume
    # a state word the simulated cloud answers instead of its own, none it documents: the
    # pod is then in an unknown state (`Seen`) and stop and resume send nothing
    undocumented_state: str | None = None
    # what the account's listing says of it besides its state: its name, labels and GPUs
    name: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    gpu_type: str | None = None
    gpu_count: int | None = None

    def seen(self, now: datetime) -> Seen:
        if self.undocumented_state is not None:
            return Seen(spelled(self.undocumented_state), PodState.RUNNING, known=False)
        state = self.state(now)
        return Seen(state.value, state)

    def state(self, now: datetime) -> PodState:
        if self.stop_requested_at is None:
            return PodState.RUNNING
        if self.stopped_at is not None and datetime.fromisoformat(self.stopped_at) <= now:
            return PodState.STOPPED
        return PodState.STOPPING

    def bill_usd(self, now: datetime) -> Decimal:
        """What this pod's compute has cost, by the cloud's own clock."""
        runs: list[Sequence[str | None]] = [*self.earlier_runs, [self.started_at, self.stopped_at]]
        return bill_runs(Decimal(self.hourly_rate_usd), runs, now)

    def resume(self, now: datetime) -> None:
        """A stopped pod runs again: a new run, billing from `now`."""
        self.earlier_runs.append([self.started_at, str(self.stopped_at)])
        self.started_at = now.isoformat()
        self.stop_requested_at = self.stopped_at = None


@dataclass
class FakeCloudState:
    pods: dict[str, FakePod] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> FakeCloudState:
        if not path.exists():
            return cls()
        raw = json.loads(path.read_text())
        pods = {ref: FakePod(**pod) for ref, pod in raw["pods"].items()}
        return cls(pods=pods)

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(path.suffix + ".tmp")
        payload = {"pods": {r: asdict(p) for r, p in self.pods.items()}}
        tmp.write_text(json.dumps(payload, indent=2))
        os.replace(tmp, path)


class FakeProvider:
    """Implements StopsPreserving, Resumes and Locates against a simulated cloud.

    `resume_refusals` is how many coming resumes the cloud refuses for lack of capacity,
    `stop_failures` how many coming stop calls fail, `stop_takes_s` how long a stop really
    takes (None: `stop_latency_s`, as declared), `regions` where each pod runs, `losing` the
    refs of pods whose stop loses their workspace with what it loses; a test may set any of
    them at any time.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        hourly_rate_usd: Decimal = Decimal("2.00"),
        stop_latency_s: float = 2.0,
        stop_failures: int = 0,
        retry_after_s: float | None = None,
        stop_takes_s: float | None = None,
        resume_refusals: int = 0,
        regions: Mapping[str, str] | None = None,
        state_file: Path | None = None,
    ) -> None:
        self.clock = clock
        self.hourly_rate_usd = hourly_rate_usd
        self.stop_latency_s = stop_latency_s
        self.stop_takes_s = stop_takes_s
        self.stop_failures = stop_failures
        self.retry_after_s = retry_after_s
        self.resume_refusals = resume_refusals
        self.regions = dict(regions or {})
        self.losing: dict[str, str] = {}
        self._state_file = state_file
        self._lock = threading.Lock()
        self._state = FakeCloudState.load(state_file) if state_file else FakeCloudState()

    @property
    def state(self) -> FakeCloudState:
        return self._state

    @property
    def credential(self) -> str:
        """Which simulated cloud a check looked at: without a shared state file, one of its
        own, which has never seen the pods a running server registered."""
        if self._state_file is not None:
            return f"none needed; the simulated cloud kept in {self._state_file}"
        return (
            "none needed; a simulated cloud of this process alone, not a running server's "
            "(set GOVERNOR_FAKE_STATE_FILE, for both, to share one)"
        )

    def describe(self, ref: str) -> PodDescription:
        with self._lock:
            pod = self._pod(ref)
            return pod.seen(self.clock.now()).describing(
                Decimal(pod.hourly_rate_usd), cannot_preserve=self.losing.get(ref)
            )

    def region_of(self, ref: str) -> str | None:
        return self.regions.get(ref)

    def launch(
        self,
        ref: str,
        *,
        name: str | None = None,
        labels: Mapping[str, str] | None = None,
        gpu_type: str | None = None,
        gpu_count: int | None = None,
        hourly_rate_usd: Decimal | None = None,
    ) -> None:
        """A pod rented in the account from elsewhere (a console, another tool): running and
        billing from now, listed with its name, labels and GPUs."""
        with self._lock:
            rate = self.hourly_rate_usd if hourly_rate_usd is None else hourly_rate_usd
            self._state.pods[ref] = FakePod(
                ref,
                str(rate),
                self.clock.now().isoformat(),
                name=name,
                labels=dict(labels or {}),
                gpu_type=gpu_type,
                gpu_count=gpu_count,
            )
            self._save()

    def pods(self) -> list[Listed]:
        with self._lock:
            found = list(self._state.pods.values())
        return [
            Listed(
                pod.ref,
                self.describe(pod.ref),
                name=pod.name,
                labels=dict(pod.labels),
                gpu_type=pod.gpu_type,
                gpu_count=pod.gpu_count,
            )
            for pod in found
        ]

    def stop(self, ref: str) -> CallResult:
        with self._lock:
            now = self.clock.now()
            pod = self._pod(ref)
            pod.stop_calls += 1
            if not (seen := pod.seen(now)).known:
                return seen.unknown()
            if self.stop_failures > 0:
                self.stop_failures -= 1
                self._save()
                return CallResult(
                    CallOutcome.RETRYABLE,
                    "simulated provider error (HTTP 503)",
                    self.retry_after_s,
                )
            if pod.stop_requested_at is None:
                takes_s = self.stop_latency_s if self.stop_takes_s is None else self.stop_takes_s
                pod.stop_requested_at = now.isoformat()
                pod.stopped_at = (now + timedelta(seconds=takes_s)).isoformat()
            self._save()
            if pod.state(now) is PodState.STOPPED:
                lost = self.losing.get(ref)
                return CallResult(CallOutcome.DONE, f"stopped; {lost or 'volume kept'}")
            return CallResult(CallOutcome.PENDING, "stopping")

    def resume(self, ref: str) -> CallResult:
        with self._lock:
            now = self.clock.now()
            pod = self._state.pods.get(ref)
            if pod is None:  # never seen, so never stopped
                return CallResult(CallOutcome.PERMANENT, f"simulated cloud has no pod {ref!r}")
            if not (seen := pod.seen(now)).known:
                return seen.unknown(CallOutcome.RETRYABLE)
            state = seen.state
            if state is PodState.RUNNING:
                return CallResult(CallOutcome.DONE, "already running")
            if state is PodState.STOPPING:
                return CallResult(CallOutcome.RETRYABLE, "still stopping; it starts once stopped")
            if self.resume_refusals > 0:
                self.resume_refusals -= 1
                return CallResult(
                    CallOutcome.PERMANENT,
                    f"simulated cloud has no capacity: no GPU free to start {ref!r} on",
                )
            pod.resume(now)
            self._save()
            return CallResult(CallOutcome.DONE, "resumed; billing again")

    def _pod(self, ref: str) -> FakePod:
        pod = self._state.pods.get(ref)
        if pod is None:
            pod = FakePod(ref, str(self.hourly_rate_usd), self.clock.now().isoformat())
            self._state.pods[ref] = pod
            self._save()
        return pod

    def _save(self) -> None:
        if self._state_file is not None:
            self._state.save(self._state_file)


class BillingFakeProvider(FakeProvider):
    """The fake cloud that also says what it has billed (compute only, like its bill): times
    `billing_factor` (a rate wrong somewhere) and `billing_lag_s` behind, as billing lags."""

    def __init__(
        self,
        clock: Clock,
        *,
        billing_factor: Decimal = Decimal(1),
        billing_lag_s: float = 0.0,
        **options: Any,
    ) -> None:
        super().__init__(clock, **options)
        self.billing_factor = billing_factor
        self.billing_lag_s = billing_lag_s

    def billed(self, since: Mapping[str, datetime]) -> dict[str, Billed]:
        """Each pod's bill over its whole life here: a pod of this cloud is first seen when it
        is registered, so nothing of it comes before its `since`."""
        with self._lock:
            through = self.clock.now() - timedelta(seconds=self.billing_lag_s)
            return {
                ref: Billed(usd(self._pod(ref).bill_usd(through) * self.billing_factor), through)
                for ref in since
            }
