from __future__ import annotations

from pathlib import Path

import httpx

from governor.adapters.providers.lambda_cloud import LambdaProvider
from governor.fakes.http_cloud import FakeCloud
from governor.fakes.lambda_cloud import FakeLambda
from tests.contract import conformance_lambda
from tests.contract.conformance import Exchange
from tests.contract.harness import Harness
from tests.fake_clouds import Served


class LambdaHarness(Harness):
    name = "lambda"
    keep = "ckpts"  # the filesystem FakeLambda.add_pod attaches
    resumes = False  # a terminated instance is gone: a new one is launched on the filesystem
    no_capacity = ()
    # Lambda's error codes: global/quota-exceeded is retried; a 5xx too; an inactive account
    # or invalid parameters are final.
    transient_stop_failures = ("code:429:global/quota-exceeded", "status:503")
    stop_refusals = ("code:403:global/account-inactive", "code:400:global/invalid-parameters")

    def cloud(self, state_file: Path, secret: str) -> FakeLambda:
        fake = FakeLambda(state_file, secret)
        fake.add_pod(self.running, "0.44")
        return fake

    def labelled(self, cloud: FakeCloud, labels: dict[str, str]) -> str:
        assert isinstance(cloud, FakeLambda)
        cloud.add_instance("labelled", 44, filesystems={"ckpts": None}, name="lab", tags=labels)
        return "labelled"

    def adapter(
        self, cloud: Served[FakeCloud], secret: str, client: httpx.Client
    ) -> LambdaProvider:
        return LambdaProvider(client, secret, f"{cloud.url}/api/v1", stop_latency_s=0.0)

    def stopped(self, cloud: FakeCloud, ref: str) -> bool:
        assert isinstance(cloud, FakeLambda)
        return cloud.state.instances[ref].status in ("terminating", "terminated")

    def billing(self, cloud: FakeCloud, ref: str) -> bool:
        assert isinstance(cloud, FakeLambda)
        return cloud.state.instances[ref].status == "active"

    def destructive_calls(self, cloud: FakeCloud) -> list[str]:
        assert isinstance(cloud, FakeLambda)
        return [f"terminate {call['instance_ids']}" for call in cloud.state.terminate_calls]

    def off_spec(self, exchanges: list[Exchange]) -> list[str]:
        return conformance_lambda.off_spec(exchanges)


HARNESS = LambdaHarness()
