from __future__ import annotations

from pathlib import Path

import httpx

from governor.adapters.providers.kubernetes import BearerToken, KubernetesProvider
from governor.fakes.http_cloud import FakeCloud, now
from governor.fakes.kubernetes import FakeKubernetes
from tests.contract import conformance_kubernetes
from tests.contract.conformance import Exchange
from tests.contract.harness import Harness
from tests.fake_clouds import Served


class KubernetesHarness(Harness):
    name = "kubernetes"
    running = "ml/job/pod-1"
    missing = "ml/job/pod-404"
    no_capacity = ()  # the API server accepts a resume; pods without room wait, Pending
    # The API conventions' Status reasons: TooManyRequests (with retryAfterSeconds),
    # InternalError and ServiceUnavailable are retried; Forbidden and Invalid are final.
    transient_stop_failures = ("throttled:1", "status:500", "status:503")
    stop_refusals = ("status:403", "status:422")

    def cloud(self, state_file: Path, secret: str) -> FakeKubernetes:
        fake = FakeKubernetes(state_file, secret)
        fake.add_pod(self.running, "2.50")
        return fake

    def labelled(self, cloud: FakeCloud, labels: dict[str, str]) -> str:
        assert isinstance(cloud, FakeKubernetes)
        ref = self.running.rpartition("/")[0] + "/labelled"
        cloud.add_pod(ref, "2.50", labels=labels)
        return ref

    def adapter(
        self, cloud: Served[FakeCloud], secret: str, client: httpx.Client
    ) -> KubernetesProvider:
        return KubernetesProvider(BearerToken(client, secret, cloud.url), stop_latency_s=0.0)

    def stopped(self, cloud: FakeCloud, ref: str) -> bool:
        assert isinstance(cloud, FakeKubernetes)
        workload = cloud.workloads[ref]
        return workload.wanted() == 0 and not workload.running(now())

    def billing(self, cloud: FakeCloud, ref: str) -> bool:
        assert isinstance(cloud, FakeKubernetes)
        workload = cloud.workloads[ref]
        return workload.wanted() > 0 and workload.running(now())

    def destructive_calls(self, cloud: FakeCloud) -> list[str]:
        return cloud.calls("DELETE")

    def off_spec(self, exchanges: list[Exchange]) -> list[str]:
        return conformance_kubernetes.off_spec(exchanges)


HARNESS = KubernetesHarness()
