from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import httpx

from governor.adapters.providers.gcp import GcpProvider, StaticToken
from governor.fakes.gcp import FakeGcp
from governor.fakes.http_cloud import FakeCloud, now
from tests.contract.harness import Harness
from tests.fake_clouds import Served

MACHINE_TYPE = "a2-highgpu-1g"
RATE = "3.67"


class GcpHarness(Harness):
    name = "gcp"
    running = "us-central1-a/pod-1"
    missing = "us-central1-a/pod-404"
    no_capacity_says = "ZONE_RESOURCE_POOL_EXHAUSTED"

    def cloud(self, state_file: Path, secret: str) -> FakeGcp:
        fake = FakeGcp(state_file, secret, project="contract-project")
        fake.add_pod(self.running, RATE, machine_type=MACHINE_TYPE)
        return fake

    def adapter(self, cloud: Served[FakeCloud], secret: str, client: httpx.Client) -> GcpProvider:
        return GcpProvider(
            client,
            StaticToken(secret),
            "contract-project",
            f"{cloud.url}/compute/v1",
            rates={MACHINE_TYPE: Decimal(RATE)},
            stop_latency_s=0.0,
        )

    def stopped(self, cloud: FakeCloud, ref: str) -> bool:
        assert isinstance(cloud, FakeGcp)
        return cloud.state.instances[ref].status(now()) == "TERMINATED"

    def billing(self, cloud: FakeCloud, ref: str) -> bool:
        assert isinstance(cloud, FakeGcp)
        return cloud.state.instances[ref].status(now()) == "RUNNING"

    def destructive_calls(self, cloud: FakeCloud) -> list[str]:
        return cloud.calls("DELETE")


HARNESS = GcpHarness()
