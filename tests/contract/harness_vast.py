from __future__ import annotations

from pathlib import Path

import httpx

from governor.adapters.providers.vast import VastProvider
from governor.fakes.http_cloud import FakeCloud
from governor.fakes.vast import TOO_FREQUENT, FakeVast
from tests.contract import conformance_vast
from tests.contract.conformance import Exchange
from tests.contract.harness import Harness
from tests.fake_clouds import Served


class VastHarness(Harness):
    name = "vast"
    running = "1001"  # Vast instance ids are numbers
    missing = "404404"
    no_capacity = ()  # Vast accepts a start whose GPU is rented out: it waits, `scheduling`
    refuses_stops = True
    # Vast's plain-text "too frequent" refusal, as a 429 or inside `success: false`, is
    # retried; an `invalid_args` refusal, or one without a code, is final.
    transient_stop_failures = ("429:2", f"declined:{TOO_FREQUENT}")
    stop_refusals = (
        "refused:invalid_args",
        "declined:Instance cannot be stopped in its current state",
    )

    def cloud(self, state_file: Path, secret: str) -> FakeVast:
        fake = FakeVast(state_file, secret)
        fake.add_pod(self.running, "0.44")
        return fake

    def labelled(self, cloud: FakeCloud, labels: dict[str, str]) -> str:
        """Vast keeps one free-text label per instance: the labels are written in it."""
        assert isinstance(cloud, FakeVast)
        cloud.add_pod("777", "0.44", label=",".join(f"{k}={v}" for k, v in labels.items()))
        return "777"

    def adapter(self, cloud: Served[FakeCloud], secret: str, client: httpx.Client) -> VastProvider:
        return VastProvider(client, secret, cloud.url, stop_latency_s=0.0)

    def stopped(self, cloud: FakeCloud, ref: str) -> bool:
        assert isinstance(cloud, FakeVast)
        return cloud.state.instances[ref].actual_status(cloud.clock()) == "stopped"

    def billing(self, cloud: FakeCloud, ref: str) -> bool:
        assert isinstance(cloud, FakeVast)
        return cloud.state.instances[ref].actual_status(cloud.clock()) == "running"

    def destructive_calls(self, cloud: FakeCloud) -> list[str]:
        assert isinstance(cloud, FakeVast)
        return cloud.calls("DELETE")

    def off_spec(self, exchanges: list[Exchange]) -> list[str]:
        return conformance_vast.off_spec(exchanges)

    def refuse_next_stop(self, cloud: Served[FakeCloud], transient: bool) -> None:
        """The stop is answered HTTP 200 `{"success": false, "msg": ...}`, without a code."""
        said = TOO_FREQUENT if transient else "Instance cannot be stopped in its current state"
        cloud.answer_next("", f"declined:{said}")  # the instance is read, then the stop


HARNESS = VastHarness()
