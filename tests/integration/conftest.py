"""Use cases against the real schema (migrated by Alembic), a frozen clock and the fake cloud."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event
from sqlalchemy.orm import Session

from governor.app import create_app
from governor.db import repository as repo
from governor.db import schema
from governor.db.engine import build_engine, session_factory, unit_of_work
from governor.db.tables import PlanCheckRow
from governor.domain.model import Phase, Role, RunStatus
from governor.domain.ports import AnyProvider, SystemClock
from governor.domain.telemetry import GIB, DeviceProblem, GpuProcess, GpuSample, Reading
from governor.fakes.cloud import FakeProvider
from governor.scheduler import tasks
from governor.services.context import GovernorConfig, ServiceContext
from governor.services.fleet import budgets, pods
from governor.services.jobs import checkins
from governor.services.money.book import Book
from governor.services.monitoring import telemetry
from governor.services.plans import admission
from governor.services.plans.document import read_plan
from governor.services.replica.health import TickLog
from governor.services.replica.leadership import Lease
from governor.services.runs import lifecycle
from governor.services.security import tokens
from governor.services.security.tokens import Principal
from governor.services.view import status
from governor.services.view.dashboard_model import Dashboard
from governor.settings import load_settings
from tests.clock import FrozenClock
from tests.plans import variant

# who acts where these tests act as an operator without HTTP
BY = Principal(Role.OPERATOR, token_id="tok_tests", label="tests")


@dataclass
class Governor:
    """A governor without HTTP: the context, its fake cloud and helpers to drive it."""

    ctx: ServiceContext
    clock: FrozenClock
    cloud: FakeProvider
    budgets_declared: int = 0

    def session(self) -> AbstractContextManager[Session]:
        return unit_of_work(self.ctx.sessions)

    def tick(self, seconds: float = 0.0) -> None:
        """Let time pass, then run one pass of every periodic task."""
        self.clock.advance(seconds)
        tasks.run_all(self.ctx)

    def budget(
        self,
        ceiling: str = "100",
        reserve: str = "0",
        tail_hours: float = 0.0,
        *,
        adopt_labelled_pods: bool = False,
    ) -> str:
        """A budget named "pilot", then "pilot-2", ...: names are unique among open budgets."""
        self.budgets_declared += 1
        name = "pilot" if self.budgets_declared == 1 else f"pilot-{self.budgets_declared}"
        declaration = budgets.Declaration(
            name,
            Decimal(ceiling),
            reserve_usd=Decimal(reserve),
            storage_tail_hours=tail_hours,
            adopt_labelled_pods=adopt_labelled_pods,
        )
        with self.session() as s:
            return budgets.declare(s, declaration, self.clock.now()).id

    def pod(
        self,
        budget_id: str,
        ref: str = "pod-1",
        storage_gb: float = 0.0,
        storage: str = "0",
        stopped_storage: str | None = None,
        node: str | None = None,
    ) -> str:
        registration = pods.Registration(
            "fake",
            ref,
            node=node,
            storage_gb=storage_gb,
            storage_usd_per_gb_month=Decimal(storage),
            stopped_storage_usd_per_gb_month=None
            if stopped_storage is None
            else Decimal(stopped_storage),
        )
        with self.session() as s:
            return pods.register(s, self.ctx, budget_id, registration, self.clock.now()).id

    def run(
        self,
        budget_id: str,
        pod_id: str,
        timeout_s: float = 120.0,
        grace_s: float = 300.0,
        total_steps: int | None = None,
    ) -> str:
        spec = lifecycle.RunSpec("job", pod_id, total_steps, timeout_s, grace_s)
        with self.session() as s:
            row, _ = lifecycle.create(s, self.ctx.config, budget_id, spec, self.clock.now())
            return row.id

    def beat(
        self,
        run_id: str,
        step: int = 1,
        status: RunStatus = RunStatus.RUNNING,
        checkpoint: checkins.Checkpoint | None = None,
        phase: Phase | None = None,
        metrics: dict[str, Any] | None = None,
    ) -> checkins.Directive:
        beat = checkins.Heartbeat(
            step=step, status=status, checkpoint=checkpoint, phase=phase, metrics=metrics
        )
        return checkins.check_in(self.ctx.sessions, self.ctx.config, run_id, beat, self.clock.now())

    def report(
        self,
        pod_id: str,
        *gpus: GpuSample,
        problems: tuple[DeviceProblem, ...] = (),
        available: bool = True,
    ) -> None:
        """One telemetry reading for the pod, taken now."""
        reading = Reading(
            self.clock.now(),
            gpus=gpus,
            problems=problems,
            available=available,
            unavailable_reason=None if available else "no NVML: libnvidia-ml.so.1 not found",
        )
        with self.session() as s:
            telemetry.ingest(s, repo.get_pod(s, pod_id), [reading], self.clock.now())

    def book(self, budget_id: str) -> Book:
        with self.session() as s:
            return budgets.book(s, self.ctx.config, budget_id, self.clock.now())


def gpu_sample(util: float = 95.0, used_gib: float = 60.0, index: int = 0) -> GpuSample:
    """An 80 GiB H100 at `util`% holding `used_gib`, its one process holding all of it."""
    used, total = int(used_gib * GIB), 80 * GIB
    return GpuSample(
        uuid=f"GPU-{index}",
        index=index,
        name="H100",
        utilization_pct=util,
        utilization_max_pct=util,
        memory_total_bytes=total,
        memory_used_bytes=used,
        memory_free_bytes=total - used,
        power_w=600.0,
        temperature_c=60.0,
        processes=(GpuProcess(4100, used),),
        clock_event_reasons=0,
    )


def make_governor(
    url: str,
    clock: FrozenClock,
    *,
    rate: str = "3.60",
    latency: float = 30.0,
    failures: int = 0,
    state_file: Path | None = None,
    cloud: FakeProvider | None = None,
    others: Mapping[str, AnyProvider] | None = None,
) -> Governor:
    cloud = cloud or FakeProvider(
        clock,
        hourly_rate_usd=Decimal(rate),
        stop_latency_s=latency,
        stop_failures=failures,
        state_file=state_file,
    )
    engine = build_engine(url)
    sessions = session_factory(engine)
    lease = Lease(sessions, SystemClock(), "test", lease_s=3600.0)  # wall time: the test's own
    assert lease.probe({}), "the only replica of a test leads"
    ctx = ServiceContext(
        engine=engine,
        sessions=sessions,
        clock=clock,
        providers={"fake": cloud, **(others or {})},
        config=GovernorConfig(enforce_interval_s=5.0, finished_linger_s=60.0),
        ticks=TickLog(),
        lease=lease,
    )
    return Governor(ctx, clock, cloud)


@pytest.fixture
def migrated_url(database_url: str) -> str:
    schema.upgrade(database_url)
    return database_url


@pytest.fixture
def gov(migrated_url: str, clock: FrozenClock) -> Iterator[Governor]:
    governor = make_governor(migrated_url, clock)
    yield governor
    governor.ctx.engine.dispose()


OPERATOR = "integration-operator"


@pytest.fixture
def client(gov: Governor, migrated_url: str) -> Iterator[TestClient]:
    """The governor's API in-process over `gov`, as its operator."""
    with gov.session() as session:
        tokens.bootstrap_operator(session, OPERATOR, gov.clock.now())
    settings = load_settings(database_url=migrated_url, scheduler_enabled=False)
    with TestClient(
        create_app(settings, gov.ctx), headers={"Authorization": f"Bearer {OPERATOR}"}
    ) as client:
        yield client


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text[:500]
    return response.json()


# --- steps several test modules share ---


WORST_CASE = Decimal("65.204859")  # the reference plan at max hours, storage and contingency


def plan(gov: Governor, job: str = "arm-a", **changes: Any) -> dict[str, Any]:
    today = gov.clock.now().date().isoformat()
    return variant({"job_id": job, "hardware.rate_quoted_at": today, **changes})


def check(gov: Governor, budget: str, document: dict[str, Any]) -> PlanCheckRow:
    with gov.session() as s:
        row = admission.check(
            s, gov.ctx.config, budget, read_plan(document), document, gov.clock.now()
        )
        s.expunge(row)
        return row


def register(gov: Governor, budget: str, plan_id: str | None, ref: str = "pod-1") -> str:
    registration = pods.Registration("fake", ref, plan_id=plan_id)
    with gov.session() as s:
        return pods.register(s, gov.ctx, budget, registration, gov.clock.now()).id


@contextmanager
def counted(gov: Governor) -> Iterator[list[str]]:
    """Every SQL statement the engine sends while the block runs."""
    statements: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    event.listen(gov.ctx.engine, "before_cursor_execute", note)
    try:
        yield statements
    finally:
        event.remove(gov.ctx.engine, "before_cursor_execute", note)


def read_dashboard(gov: Governor) -> Dashboard:
    """What the /status page shows, as of the governor's clock."""
    with gov.session() as s:
        return status.dashboard(s, gov.ctx.config, gov.clock.now())
