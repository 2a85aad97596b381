from __future__ import annotations

from pathlib import Path

import httpx

from governor.adapters.providers.runpod import RunPodProvider
from governor.fakes.http_cloud import FakeCloud
from governor.fakes.runpod import FakeRunPod
from tests.contract.harness import Harness
from tests.contract.runpod_spec import conforming
from tests.fake_clouds import Served


class RunPodHarness(Harness):
    name = "runpod"
    no_capacity_says = "not enough free GPUs"
    # RunPod's own transient failure inside an HTTP 200 (INTERNAL_SERVER_ERROR, "Something
    # went wrong. Please try again later"); a refused key is HTTP 401 or 403.
    transient_stop_failures = ("transient",)
    stop_refusals = ("status:401", "status:403")

    def cloud(self, state_file: Path, secret: str) -> FakeRunPod:
        fake = FakeRunPod(state_file, secret)
        fake.add_pod(self.running, "0.44")
        return fake

    def labelled(self, cloud: FakeCloud, labels: dict[str, str]) -> str:
        """RunPod keeps a name per pod and no labels: the labels are written in its name."""
        assert isinstance(cloud, FakeRunPod)
        cloud.add_pod("labelled", "0.44", name=",".join(f"{k}={v}" for k, v in labels.items()))
        return "labelled"

    def adapter(
        self, cloud: Served[FakeCloud], secret: str, client: httpx.Client
    ) -> RunPodProvider:
        """The adapter, every request it sends and answer it gets checked against RunPod's
        own definitions of its API."""
        url = f"{cloud.url}/graphql"
        return RunPodProvider(conforming(client), secret, url, stop_latency_s=0.0)

    def stopped(self, cloud: FakeCloud, ref: str) -> bool:
        assert isinstance(cloud, FakeRunPod)
        return cloud.state.pods[ref].desired_status == "EXITED"

    def billing(self, cloud: FakeCloud, ref: str) -> bool:
        assert isinstance(cloud, FakeRunPod)
        return cloud.state.pods[ref].desired_status == "RUNNING"

    def destructive_calls(self, cloud: FakeCloud) -> list[str]:
        assert isinstance(cloud, FakeRunPod)
        kept = ("podStop", "podResume", "podBidResume")
        return [name for name in cloud.state.mutation_names() if name not in kept]


HARNESS = RunPodHarness()
