"""What the provider contract suite needs from each adapter: a fake of its cloud with one
running pod, the adapter pointed at that fake over real HTTP, and what the adapter can do.

Every `harness_<provider>.py` in this folder defines `HARNESS`, an instance of a Harness
subclass; the suite runs every contract test against each of them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import httpx

from governor.domain.ports import AnyProvider
from governor.fakes.http_cloud import FakeCloud
from tests.contract.conformance import Exchange
from tests.fake_clouds import Served


class Harness(ABC):
    name: str
    running: str = "pod-1"  # a running pod the fake starts with
    missing: str = "pod-404"  # a pod the fake has never heard of
    keep: str | None = None  # terminate-only: the persistent filesystem attached to `running`
    retry_after_honoured: bool = True  # a 429's Retry-After reaches CallResult.retry_after_s
    resumes: bool = True  # the adapter can start a stopped pod again (Resumes)
    # Canned answers after which the next resume (a read, then the start) is refused for want
    # of capacity, and what that refusal says; () where the provider never refuses so.
    no_capacity: tuple[str, ...] = ("", "no-capacity")
    no_capacity_says: str = ""
    # the fake can refuse a stop in a shape easy to take for an acceptance (refuse_next_stop)
    refuses_stops: bool = False
    # The provider's documented failures of the stop call itself (every adapter reads the pod
    # first), as canned answers of its fake (governor.fakes.http_cloud): those its
    # documentation says to retry, and its refusals. The rate limits, 5xx, timeouts and
    # unreadable bodies every provider shares are the suite's FAILURES.
    transient_stop_failures: tuple[str, ...] = ()
    stop_refusals: tuple[str, ...] = ()

    @abstractmethod
    def cloud(self, state_file: Path, secret: str) -> FakeCloud:
        """A fake of the provider's cloud accepting `secret`, with `running` in it."""

    @abstractmethod
    def labelled(self, cloud: FakeCloud, labels: dict[str, str]) -> str:
        """A running pod added to the fake carrying `labels` the provider's own way (its
        labels or tags, or, for a provider without any, written in its name); its ref."""

    @abstractmethod
    def adapter(self, cloud: Served[FakeCloud], secret: str, client: httpx.Client) -> AnyProvider:
        """The real adapter, configured to reach the fake at `cloud.url` with `secret` over
        `client` (made by `cloud`, which times out the requests the fake holds)."""

    @abstractmethod
    def stopped(self, cloud: FakeCloud, ref: str) -> bool:
        """Whether the fake cloud has `ref` stopped (terminated, for terminate-only)."""

    @abstractmethod
    def billing(self, cloud: FakeCloud, ref: str) -> bool:
        """Whether the fake cloud has `ref` running, billing its compute."""

    @abstractmethod
    def destructive_calls(self, cloud: FakeCloud) -> list[str]:
        """Requests the fake received that destroy a workspace (terminate, delete)."""

    def off_spec(self, exchanges: list[Exchange]) -> list[str]:
        """What in the adapter's `exchanges` with the fake the provider's own published
        definitions (tests/specs/) do not allow; nothing where none is vendored."""
        return []

    def refuse_next_stop(self, cloud: Served[FakeCloud], transient: bool) -> None:
        """Makes the fake refuse the next stop in a shape its provider documents and that
        is easy to take for an acceptance (a failure reported later, a refusal without an
        error code): `transient` in words that mean try again. Only where `refuses_stops`."""
        raise NotImplementedError


class BillingHarness(Harness):
    """An adapter that also reads its provider's lagging bill a window at a time."""

    tick_s: float  # how far the meter moves per pass while a bill builds up
    settled_after_s: float  # how long the pod must run before a bill covers some of it

    @abstractmethod
    def billed_cloud(
        self,
        state_file: Path,
        secret: str,
        clock: Callable[[], datetime],
        factor: str,
        lag_s: float,
    ) -> FakeCloud:
        """The fake cloud on `clock`, with `running` in it and its bill `factor` times the
        truth and `lag_s` late."""

    @abstractmethod
    def billed_adapter(self, url: str, secret: str, client: httpx.Client) -> AnyProvider:
        """The adapter that reads the bill too, configured to reach the fake at `url`."""
