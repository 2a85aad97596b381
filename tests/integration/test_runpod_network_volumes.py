"""A RunPod pod whose workspace is a network volume, through the real adapter and the fake
RunPod over HTTP: it registers with the volume as its storage (at RunPod's network-volume
price, the same running or stopped), the volume is in the storage tail of committed spend,
and a stop keeps it, billing on; a pod with only a container disk is still refused."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from governor.adapters.providers.runpod import RunPodProvider
from governor.db import repository as repo
from governor.db.tables import LedgerEntryRow
from governor.domain.errors import Invalid
from governor.domain.model import ChargeKind, PodState
from governor.fakes.http_cloud import running
from governor.fakes.runpod import FakeRunPod
from governor.services.fleet import pods
from tests.clock import FrozenClock
from tests.integration.conftest import BY, Governor, make_governor

KEY = "rpa_NETWORK_VOLUME_SECRET_42"
GB = 200  # STANDARD, under 1 TB: $0.07/GB-month, so $14.00 a month


@pytest.fixture
def runpod_gov(migrated_url: str, clock: FrozenClock, tmp_path: Path) -> Iterator[Governor]:
    cloud = FakeRunPod(tmp_path / "runpod.json", KEY)
    cloud.add_pod("on-volume", "0.44")
    cloud.add_network_volume("on-volume", "vol-1", GB)
    cloud.add_pod("disk-only", "0.44")
    cloud.state.pods["disk-only"].volume_in_gb = 0
    with running(cloud) as server, httpx.Client() as client:
        adapter = RunPodProvider(client, KEY, f"{server.url}/graphql", stop_latency_s=0.0)
        gov = make_governor(migrated_url, clock, others={"runpod": adapter})
        yield gov
        gov.ctx.engine.dispose()


def register(gov: Governor, budget: str, ref: str) -> str:
    with gov.session() as s:
        registration = pods.Registration("runpod", ref)
        return pods.register(s, gov.ctx, budget, registration, gov.clock.now(), by=BY).id


def storage_charged(gov: Governor, pod: str) -> Decimal:
    with gov.session() as s:
        charged = select(func.sum(LedgerEntryRow.amount_usd)).where(
            LedgerEntryRow.pod_id == pod, LedgerEntryRow.charge == ChargeKind.STORAGE
        )
        return s.scalar(charged) or Decimal(0)


def test_a_network_volume_pod_registers_with_the_volume_in_its_storage_tail(
    runpod_gov: Governor,
) -> None:
    gov = runpod_gov
    budget = gov.budget(tail_hours=730)
    pod = register(gov, budget, "on-volume")
    with gov.session() as s:
        row = repo.get_pod(s, pod)
        assert row.cannot_preserve is None and row.loss_acknowledged is None
        assert row.storage_gb == GB
        assert row.storage_usd_per_gb_month == row.stopped_storage_usd_per_gb_month
        assert row.stopped_storage_usd_per_gb_month == Decimal("0.07")
    assert gov.book(budget).figures.storage_tail == Decimal("14.00")  # 200 GB x $0.07, a month


def test_a_network_volume_pods_stop_keeps_the_volume_billing_on(runpod_gov: Governor) -> None:
    gov = runpod_gov
    budget = gov.budget(tail_hours=730)
    pod = register(gov, budget, "on-volume")
    with gov.session() as s:
        pods.stop_manually(s, gov.ctx, pod, "end of day", gov.clock.now(), by=BY)
    gov.tick()
    with gov.session() as s:
        assert repo.get_pod(s, pod).state is PodState.STOPPED
        messages = [e.message for e in repo.events(s)]
    assert not any("loses its workspace" in m for m in messages)
    before = storage_charged(gov, pod)
    gov.tick(3600)  # stopped an hour: the volume bills on, 200 GB x $0.07 / 730 h
    assert storage_charged(gov, pod) - before == Decimal("0.019178")
    assert gov.book(budget).figures.storage_tail == Decimal("14.00")


def test_a_pod_with_only_a_container_disk_is_still_refused(runpod_gov: Governor) -> None:
    gov = runpod_gov
    with pytest.raises(Invalid) as refused:
        register(gov, gov.budget(), "disk-only")
    said = str(refused.value)
    assert "no network volume" in said and "erases its container disk" in said
    assert "acknowledge_loss" in said
