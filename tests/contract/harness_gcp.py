from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import httpx

from governor.adapters.providers.gcp import GcpProvider, StaticToken
from governor.adapters.providers.gcp_billing import BilledGcpProvider
from governor.fakes.gcp import FakeGcp
from governor.fakes.http_cloud import FakeCloud, now
from tests.contract import conformance_gcp
from tests.contract.conformance import Exchange
from tests.contract.harness import BillingHarness
from tests.fake_clouds import Served

MACHINE_TYPE = "a2-highgpu-1g"
RATE = "3.67"
EXPORT = "billing-project.billing.gcp_billing_export_resource_v1_0123AB_4567CD_89EF01"


class GcpHarness(BillingHarness):
    name = "gcp"
    running = "us-central1-a/pod-1"
    missing = "us-central1-a/pod-404"
    no_capacity_says = "ZONE_RESOURCE_POOL_EXHAUSTED"
    refuses_stops = True
    # Compute Engine's error reasons and Operation error codes: rate limits and quotas are
    # retried, as is a 5xx backendError; a forbidden call, or an Operation that failed for
    # good, is final.
    transient_stop_failures = (
        "reason:403:rateLimitExceeded",
        "reason:429:RATE_LIMIT_EXCEEDED",
        "reason:503:backendError",
        "operation-error:QUOTA_EXCEEDED",
    )
    stop_refusals = ("reason:403:forbidden", "operation-error:UNSUPPORTED_OPERATION")

    def cloud(self, state_file: Path, secret: str) -> FakeGcp:
        fake = FakeGcp(state_file, secret, project="contract-project")
        fake.add_pod(self.running, RATE, machine_type=MACHINE_TYPE)
        return fake

    def labelled(self, cloud: FakeCloud, labels: dict[str, str]) -> str:
        assert isinstance(cloud, FakeGcp)
        ref = self.running.rpartition("/")[0] + "/labelled-vm"
        cloud.add_pod(ref, RATE, machine_type=MACHINE_TYPE, labels=labels)
        return ref

    def adapter(self, cloud: Served[FakeCloud], secret: str, client: httpx.Client) -> GcpProvider:
        return GcpProvider(
            client,
            StaticToken(secret),
            "contract-project",
            f"{cloud.url}/compute/v1",
            rates={MACHINE_TYPE: Decimal(RATE)},
            stop_latency_s=0.0,
        )

    tick_s = 600.0  # the export bills hour by hour
    settled_after_s = 4 * 3600.0

    def billed_cloud(
        self,
        state_file: Path,
        secret: str,
        clock: Callable[[], datetime],
        factor: str,
        lag_s: float,
    ) -> FakeGcp:
        fake = FakeGcp(state_file, secret, project="contract-project")
        fake.clock = clock
        fake.export_billing(EXPORT, factor, lag_s)
        fake.add_pod(self.running, RATE, machine_type=MACHINE_TYPE)
        return fake

    def billed_adapter(self, url: str, secret: str, client: httpx.Client) -> BilledGcpProvider:
        return BilledGcpProvider(
            client,
            StaticToken(secret),
            "contract-project",
            f"{url}/compute/v1",
            rates={MACHINE_TYPE: Decimal(RATE)},
            stop_latency_s=0.0,
            table=EXPORT,
            bigquery_url=f"{url}/bigquery/v2",
        )

    def stopped(self, cloud: FakeCloud, ref: str) -> bool:
        assert isinstance(cloud, FakeGcp)
        return cloud.state.instances[ref].status(now()) == "TERMINATED"

    def billing(self, cloud: FakeCloud, ref: str) -> bool:
        assert isinstance(cloud, FakeGcp)
        return cloud.state.instances[ref].status(now()) == "RUNNING"

    def destructive_calls(self, cloud: FakeCloud) -> list[str]:
        return cloud.calls("DELETE")

    def off_spec(self, exchanges: list[Exchange]) -> list[str]:
        return conformance_gcp.off_spec(exchanges)

    def refuse_next_stop(self, cloud: Served[FakeCloud], transient: bool) -> None:
        """The stop is accepted, and its Operation ends DONE with an error."""
        assert isinstance(cloud.fake, FakeGcp)
        cloud.fake.fail_next_operations("QUOTA_EXCEEDED" if transient else "UNSUPPORTED_OPERATION")


HARNESS = GcpHarness()
