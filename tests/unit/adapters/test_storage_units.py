"""Every adapter's storage against its provider's published unit, one worked example each.

A provider prices storage per GB (10^9 bytes) or per GiB (2^30 bytes), per month or per
hour; the adapter's `Storage` must come to what the provider's own arithmetic bills, to the
cent a month. Each row: the provider's figures as its API gives them (set in its fake), the
bill its price list works out for them, and so what the governor must meter per month and,
at the 730-hour month providers use, per hour. docs/providers.md names each figure's source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from governor.domain.ledger import PodMeter, storage_tail
from governor.domain.model import PodState
from governor.domain.money import HOURS_PER_MONTH, per_hour_from_month
from governor.fakes.aws import FakeEc2
from governor.fakes.gcp import FakeGcp
from governor.fakes.http_cloud import FakeCloud, running
from governor.fakes.lambda_cloud import FakeLambda
from governor.fakes.runpod import FakeRunPod
from governor.fakes.vast import FakeVast
from tests.contract.harness import Harness
from tests.contract.harness_aws import HARNESS as AWS
from tests.contract.harness_gcp import HARNESS as GCP
from tests.contract.harness_kubernetes import HARNESS as KUBERNETES
from tests.contract.harness_lambda import HARNESS as LAMBDA
from tests.contract.harness_runpod import HARNESS as RUNPOD
from tests.contract.harness_vast import HARNESS as VAST
from tests.fake_clouds import Served

SECRET = "sk_STORAGE_UNITS_SECRET_0000"
GIB = 2**30


@dataclass(frozen=True)
class Example:
    harness: Harness
    shape: Callable[[FakeCloud, str], None]  # puts the example's figures in the fake
    running_usd_month: Decimal | None  # None: the provider reports no storage
    stopped_usd_month: Decimal | None


def _runpod_200_gb_volume(cloud: FakeCloud, ref: str) -> None:
    assert isinstance(cloud, FakeRunPod)
    cloud.state.pods[ref].volume_in_gb = 200  # $0.10/GB-mo running, $0.20 stopped


def _runpod_2000_gb_network_volume(cloud: FakeCloud, ref: str) -> None:
    assert isinstance(cloud, FakeRunPod)
    cloud.add_network_volume(ref, "vol-1", 2000)  # STANDARD: 1 TB at $0.07, the rest $0.05


def _vast_disk_at_0_0082_an_hour(cloud: FakeCloud, ref: str) -> None:
    assert isinstance(cloud, FakeVast)
    instance = cloud.state.instances[ref]
    instance.disk_space, instance.storage_total_cost = 40.0, "0.0082"  # $/hour, any state


def _lambda_100_gib_used(cloud: FakeCloud, _ref: str) -> None:
    assert isinstance(cloud, FakeLambda)
    cloud.state.filesystems["ckpts"].bytes_used = 100 * GIB  # $0.20/GiB-mo used


def _gcp_200_gib_pd_ssd_and_a_local_ssd(cloud: FakeCloud, ref: str) -> None:
    assert isinstance(cloud, FakeGcp)
    instance = cloud.state.instances[ref]
    boot = cloud.state.disks[instance.disks[0]]
    boot.type, boot.size_gb = "pd-ssd", 200  # $0.17/GiB-mo: Google's example, $34.00
    instance.local_ssds = 1  # 375 GiB kept by the stop at $0.08/GiB-mo: $30.00


def _aws_100_gib_gp3(cloud: FakeCloud, ref: str) -> None:
    assert isinstance(cloud, FakeEc2)
    cloud.state.instances[ref].volumes = {"vol-0root000000000001": 100}  # $0.08/GiB-mo


def _as_is(_cloud: FakeCloud, _ref: str) -> None:
    pass


EXAMPLES = {
    "runpod: 200 GB volume, per GB-month": Example(
        RUNPOD, _runpod_200_gb_volume, Decimal("20.00"), Decimal("40.00")
    ),
    "runpod: 2,000 GB STANDARD network volume, tiered": Example(
        RUNPOD, _runpod_2000_gb_network_volume, Decimal("120.00"), Decimal("120.00")
    ),
    "vast: disk billed per hour": Example(
        VAST, _vast_disk_at_0_0082_an_hour, Decimal("0.0082") * 730, Decimal("0.0082") * 730
    ),
    "lambda: 100 GiB used, per GiB-month": Example(
        LAMBDA, _lambda_100_gib_used, Decimal("20.00"), Decimal("20.00")
    ),
    "gcp: 200 GiB pd-ssd + 375 GiB local SSD, per GiB-month": Example(
        GCP, _gcp_200_gib_pd_ssd_and_a_local_ssd, Decimal("64.00"), Decimal("64.00")
    ),
    "aws: 100 GiB gp3, per GiB-month": Example(
        AWS, _aws_100_gib_gp3, Decimal("8.00"), Decimal("8.00")
    ),
    "kubernetes: no price": Example(KUBERNETES, _as_is, None, None),
}


@pytest.mark.parametrize("example", EXAMPLES.values(), ids=EXAMPLES.keys())
def test_storage_comes_to_what_the_provider_bills(example: Example, tmp_path: Path) -> None:
    harness = example.harness
    cloud = harness.cloud(tmp_path / "cloud.json", SECRET)
    example.shape(cloud, harness.running)
    with running(cloud) as server:
        served = Served(cloud, server.url)
        with served.client() as client:
            storage = harness.adapter(served, SECRET, client).describe(harness.running).storage
    if example.running_usd_month is None:
        assert storage is None
        return
    assert storage is not None
    cent = Decimal("0.01")
    for usd_per_gb_month, billed in (
        (storage.usd_per_gb_month, example.running_usd_month),
        (storage.stopped_usd_per_gb_month, example.stopped_usd_month),
    ):
        assert billed is not None
        assert (usd_per_gb_month * storage.gb).quantize(cent) == billed.quantize(cent)
        hourly = per_hour_from_month(usd_per_gb_month, storage.gb)
        assert abs(hourly - billed / HOURS_PER_MONTH) < Decimal("0.000001")
    # what survives the stop is in the committed spend's storage tail, at the stopped rate
    assert example.stopped_usd_month is not None
    week = Decimal(24 * 7)
    meter = PodMeter(
        PodState.RUNNING,
        Decimal("2.00"),
        storage.gb,
        storage.usd_per_gb_month,
        storage.stopped_usd_per_gb_month,
        datetime(2026, 1, 1, tzinfo=UTC),
        30.0,
    )
    tail = example.stopped_usd_month / HOURS_PER_MONTH * week
    assert abs(storage_tail(meter, week) - tail) <= Decimal("0.01")
