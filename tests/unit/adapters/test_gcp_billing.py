"""The GCP adapter's bill from the BigQuery billing export, against the fake BigQuery over
real HTTP: a job still running is polled with getQueryResults until it completes, every
page of the result is read (pageToken), and an export in another currency is refused."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from governor.adapters.providers.gcp import StaticToken
from governor.adapters.providers.gcp_billing import MAX_POLLS, BilledGcpProvider
from governor.domain.ports import ProviderError
from governor.fakes.bigquery import BillingExport, ExportRow
from governor.fakes.gcp import FakeGcp
from governor.fakes.http_cloud import running
from tests.clock import FrozenClock

TOKEN = "ya29.UNIT_TEST_BILLING_TOKEN"
PROJECT = "unit-project"
TABLE = "billing-project.billing.gcp_billing_export_resource_v1_0123AB_4567CD_89EF01"
POD = "us-central1-a/pod-1"
RATE = Decimal("3.67")
HOURS = 3


class Export:
    def __init__(self, fake: FakeGcp, export: BillingExport, adapter: BilledGcpProvider) -> None:
        self.fake, self.export, self.adapter = fake, export, adapter

    def read(self, clock: FrozenClock, registered: datetime) -> Decimal:
        billed = self.adapter.billed_since(POD, registered, clock.now(), None)
        assert billed is not None
        return billed.amount_usd

    def result_reads(self) -> list[str]:
        """The getQueryResults requests: a job's polls and its further pages."""
        return [c for c in self.fake.calls("GET") if "/bigquery/v2/" in c]


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def export(tmp_path: Path, clock: FrozenClock) -> Iterator[Export]:
    fake = FakeGcp(tmp_path / "gcp.json", TOKEN, project=PROJECT)
    fake.clock = clock.now
    billing = fake.export_billing(TABLE)
    fake.add_pod(POD, str(RATE))
    with running(fake) as server, httpx.Client(timeout=10.0) as client:
        adapter = BilledGcpProvider(
            client,
            StaticToken(TOKEN),
            PROJECT,
            f"{server.url}/compute/v1",
            table=TABLE,
            bigquery_url=f"{server.url}/bigquery/v2",
        )
        yield Export(fake, billing, adapter)


def in_euros(registered: datetime) -> ExportRow:
    """An hour of the VM that the export bills in euros."""
    hour = timedelta(hours=1)
    return ExportRow(
        PROJECT, "us-central1-a", "pod-1", registered, registered + hour, Decimal(1), "EUR"
    )


def test_a_job_still_running_is_polled_until_it_completes(
    export: Export, clock: FrozenClock
) -> None:
    registered = clock.now()
    clock.advance(HOURS * 3600)
    at_once = export.read(clock, registered)
    assert at_once > RATE * HOURS  # the VM's hours and its boot disk's
    assert export.result_reads() == []
    export.export.pending_polls = 2  # jobs.query and the first getQueryResults: not done yet
    assert export.read(clock, registered) == at_once
    assert len(export.result_reads()) == 2


def test_a_job_that_never_completes_is_given_up_for_now(export: Export, clock: FrozenClock) -> None:
    registered = clock.now()
    clock.advance(HOURS * 3600)
    export.export.pending_polls = MAX_POLLS + 10
    with pytest.raises(ProviderError, match="still running") as caught:
        export.read(clock, registered)
    assert caught.value.retryable
    assert len(export.result_reads()) == MAX_POLLS


def test_every_page_of_the_result_is_read(export: Export, clock: FrozenClock) -> None:
    registered = clock.now()
    clock.advance(HOURS * 3600)
    export.export.page_size = 1
    export.export.extra.append(in_euros(registered))  # a second result row: page two
    with pytest.raises(ProviderError, match="billing export is in EUR") as caught:
        export.read(clock, registered)  # the euros come second: read only from page two
    assert not caught.value.retryable
    [page_two] = export.result_reads()
    assert page_two.startswith("GET /bigquery/v2/projects/unit-project/queries/job_")


def test_an_export_in_another_currency_is_refused(export: Export, clock: FrozenClock) -> None:
    registered = clock.now()
    clock.advance(HOURS * 3600)
    export.export.extra.append(in_euros(registered))
    with pytest.raises(ProviderError, match="EUR, not USD: the governor counts dollars"):
        export.read(clock, registered)
    assert export.result_reads() == []  # one page held both currencies
