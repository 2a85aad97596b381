"""The hot path: a heartbeat's work does not grow with its budget, counted in SQL statements."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from governor.db import repository as repo
from governor.db import schema
from governor.db.engine import read_only
from governor.db.tables import LedgerEntryRow, RunPhaseRow, TokenRow
from governor.domain.errors import Unauthenticated
from governor.domain.model import Action, Phase, Role, RunStatus
from governor.services.fleet import pods as pod_service
from governor.services.jobs.checkins import Checkpoint
from governor.services.money import metering
from governor.services.security import tokens
from governor.services.security.tokens import TokenCache
from tests.clock import FrozenClock
from tests.integration.conftest import BY, Governor, counted, make_governor

D = Decimal


def fleet(gov: Governor, pods: int) -> list[str]:
    """A budget with `pods` running pods, a run on each; returns the run ids."""
    budget = gov.budget("1000000")
    runs = [gov.run(budget, gov.pod(budget, ref=f"pod-{pods}-{n}")) for n in range(pods)]
    gov.tick()  # the enforcement pass keeps the figures the heartbeats answer with
    for run in runs[:2]:
        gov.beat(run)
    return runs


def beat_statements(gov: Governor, run: str, **beat: Any) -> list[str]:
    with counted(gov) as statements:
        gov.beat(run, **beat)
    return statements


def test_a_heartbeat_costs_the_same_in_a_budget_of_one_pod_or_a_hundred(gov: Governor) -> None:
    small, large = fleet(gov, 1)[0], fleet(gov, 100)[0]
    one = beat_statements(gov, small, step=2)
    hundred = beat_statements(gov, large, step=2)
    assert len(one) == len(hundred) <= 6, hundred
    assert one == hundred  # the very same statements, whatever the budget holds


def test_a_beat_that_enters_a_new_phase_stays_on_the_plain_path(gov: Governor) -> None:
    run = fleet(gov, 1)[0]
    plain = beat_statements(gov, run, step=3)
    gov.tick(10)
    entering = beat_statements(gov, run, step=4, phase=Phase.EVALUATION)
    history = [s for s in entering if s.lstrip().upper().startswith("INSERT INTO RUN_PHASES")]
    assert len(history) == 1 and len(entering) == len(plain) + 1, entering
    history_of = select(RunPhaseRow.phase, RunPhaseRow.at).where(RunPhaseRow.run_id == run)
    with gov.session() as s:
        row = repo.get_run(s, run)
        assert (row.phase, row.phase_since, row.step) == (Phase.EVALUATION, gov.clock.now(), 4)
        assert s.execute(history_of).all() == [(Phase.EVALUATION, gov.clock.now())]


def test_taking_a_stop_acknowledgement_costs_the_same_too(gov: Governor) -> None:
    counts = []
    for pods in (1, 100):
        run = fleet(gov, pods)[0]
        counts.append(len(acknowledgement_statements(gov, run, step=3)))
    assert counts[0] == counts[1], counts


def acknowledgement_statements(gov: Governor, run: str, step: int) -> list[str]:
    """The statements of the beat that acknowledges a stop ordered for the run's pod."""
    with gov.session() as s:
        pod_id = repo.get_run(s, run).pod_id
    with gov.session() as s:
        pod_service.stop_manually(s, gov.ctx, pod_id, "end of day", gov.clock.now(), by=BY)
    assert gov.beat(run).action is Action.STOP
    return beat_statements(
        gov, run, step=step, status=RunStatus.STOPPING, checkpoint=Checkpoint(step, f"/ws/c{step}")
    )


def test_only_a_plain_beats_commit_skips_the_wait_for_the_disk(gov: Governor) -> None:
    run = fleet(gov, 1)[0]
    plain = beat_statements(gov, run, step=3)
    ack = acknowledgement_statements(gov, run, step=5)
    # SQLite's commits never wait for the disk (WAL, synchronous=NORMAL); on PostgreSQL a
    # plain beat's record alone may be lost with the database server: an acknowledgement,
    # which moves a stop order, waits for it
    postgres = gov.ctx.engine.dialect.name == "postgresql"
    skips = ["SET LOCAL synchronous_commit TO OFF"] if postgres else []
    assert [s for s in plain if "synchronous_commit" in s] == skips, plain
    assert [s for s in ack if "synchronous_commit" in s] == [], ack


def test_the_figures_answered_are_the_latest_passs(gov: Governor) -> None:
    [run] = fleet(gov, 1)
    gov.tick(600)
    directive = gov.beat(run, step=5)
    book = gov.book(repo_budget(gov, run))
    assert directive.budget.as_of == gov.clock.now()
    assert directive.budget.spent == book.figures.spent
    gov.clock.advance(60)  # no pass since: the answer says how old its figures are
    later = gov.beat(run, step=6)
    assert later.budget.as_of == directive.budget.as_of
    assert later.budget.spent == directive.budget.spent


def repo_budget(gov: Governor, run: str) -> str:
    with gov.session() as s:
        return repo.get_run(s, run).budget_id


@pytest.fixture
def sqlite_gov(tmp_path: Path, clock: FrozenClock) -> Iterator[Governor]:
    """SQLite alone: PostgreSQL orders writers with row locks, with no turn to take."""
    url = f"sqlite:///{tmp_path / 'governor.db'}"
    schema.upgrade(url)
    gov = make_governor(url, clock)
    yield gov
    gov.ctx.engine.dispose()


def test_sqlite_writers_take_turns_and_readers_never_wait(sqlite_gov: Governor) -> None:
    gov = sqlite_gov
    budget = gov.budget()
    holding, release = threading.Event(), threading.Event()

    def writer() -> None:
        with gov.session() as s:
            repo.get_budget(s, budget).name = "renamed"
            holding.set()
            release.wait(30)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert holding.wait(30)
        with read_only(gov.ctx.sessions) as s:  # a reader is not held up by the writer
            assert repo.get_budget(s, budget).name == "pilot"
    finally:
        release.set()
        thread.join(30)
    with read_only(gov.ctx.sessions) as s:
        assert repo.get_budget(s, budget).name == "renamed"
    nested = pytest.raises(RuntimeError, match="already has a unit of work open")
    with gov.session(), nested, gov.session():  # it would wait for itself: it is refused
        pass


def revoke_elsewhere(gov: Governor, label: str) -> None:
    """Revoke a token as another replica would: in the database, unknown to this cache."""
    with gov.session() as s:
        row = s.scalars(select(TokenRow).where(TokenRow.label == label)).one()
        row.revoked_at = gov.clock.now()


def test_a_token_revoked_on_another_replica_stops_working_within_one_check(
    gov: Governor,
) -> None:
    with gov.session() as s:
        token = tokens.issue(s, Role.VIEWER, gov.clock.now(), label="dashboard")
    now = [0.0]
    cache = TokenCache(check_s=5.0, monotonic=lambda: now[0])
    assert cache.authenticate(gov.ctx.sessions, token, gov.clock.now()).role is Role.VIEWER
    revoke_elsewhere(gov, "dashboard")
    now[0] = 4.9
    with counted(gov) as statements:
        assert cache.remembered(token, gov.clock.now()) is not None
        assert cache.authenticate(gov.ctx.sessions, token, gov.clock.now()).role is Role.VIEWER
    assert statements == []  # remembered: no round trip
    now[0] = 5.0  # one check later: the revocation is learnt, whichever replica made it
    assert cache.remembered(token, gov.clock.now()) is None
    with pytest.raises(Unauthenticated, match="revoked"):
        cache.authenticate(gov.ctx.sessions, token, gov.clock.now())


def test_a_remembered_token_costs_one_check_an_interval_however_many_are_remembered(
    gov: Governor,
) -> None:
    with gov.session() as s:
        issued = [tokens.issue(s, Role.VIEWER, gov.clock.now()) for _ in range(50)]
    now = [0.0]
    cache = TokenCache(check_s=5.0, monotonic=lambda: now[0])
    for token in issued:
        cache.authenticate(gov.ctx.sessions, token, gov.clock.now())
    for interval in range(1, 4):  # a job beats every 15 s: far past the interval
        now[0] = 15.0 * interval
        with counted(gov) as statements:
            for token in issued:
                assert cache.authenticate(gov.ctx.sessions, token, gov.clock.now())
                assert cache.remembered(token, gov.clock.now()) is not None
        asked = [s for s in statements if s != "BEGIN"]  # SQLite's reader opens its snapshot
        assert len(asked) == 1, asked  # which tokens were revoked lately: that is all
        assert "revoked_at" in asked[0]


def test_a_revocation_committed_late_is_still_learnt(gov: Governor) -> None:
    """A revocation stamped before the cache's last check but committed after it (a long
    transaction, or a replica whose clock runs behind) is still found at the next check."""
    with gov.session() as s:
        token = tokens.issue(s, Role.VIEWER, gov.clock.now(), label="late")
    now = [0.0]
    cache = TokenCache(check_s=5.0, monotonic=lambda: now[0])
    stamped = gov.clock.now()
    gov.clock.advance(30)
    cache.authenticate(gov.ctx.sessions, token, gov.clock.now())  # checks, then remembers
    with gov.session() as s:
        s.scalars(select(TokenRow).where(TokenRow.label == "late")).one().revoked_at = stamped
    now[0] = 5.0
    with pytest.raises(Unauthenticated, match="revoked"):
        cache.authenticate(gov.ctx.sessions, token, gov.clock.now())


def test_an_expired_token_is_refused_though_remembered(gov: Governor) -> None:
    with gov.session() as s:
        expires = gov.clock.now() + timedelta(minutes=1)
        token = tokens.issue(s, Role.VIEWER, gov.clock.now(), expires_at=expires)
    cache = TokenCache(check_s=3600.0)
    cache.authenticate(gov.ctx.sessions, token, gov.clock.now())
    gov.clock.advance(60)
    with pytest.raises(Unauthenticated, match="expired"):
        cache.remembered(token, gov.clock.now())


def test_the_cache_is_bounded_and_never_remembers_a_stranger(gov: Governor) -> None:
    with gov.session() as s:
        issued = [tokens.issue(s, Role.VIEWER, gov.clock.now()) for _ in range(3)]
    cache = TokenCache(check_s=60.0, size=2)
    for token in issued:
        cache.authenticate(gov.ctx.sessions, token, gov.clock.now())
    with counted(gov) as statements:  # the newest two are remembered
        cache.authenticate(gov.ctx.sessions, issued[2], gov.clock.now())
    assert statements == []
    with counted(gov) as statements:
        cache.authenticate(gov.ctx.sessions, issued[0], gov.clock.now())  # the oldest was let go
    assert statements != []
    for _ in range(2):
        with pytest.raises(Unauthenticated):
            cache.authenticate(gov.ctx.sessions, "gov_view_nobody", gov.clock.now())


def test_concurrent_meters_charge_each_second_once(gov: Governor) -> None:
    """Writers of a budget's ledger take its lock, so its running totals never double-count."""
    budget = gov.budget("1000000")
    pod = gov.pod(budget)
    start = gov.clock.now()
    marks = [start + timedelta(minutes=m) for m in (50, 10, 40, 20, 60, 30, 70, 5)]
    # On PostgreSQL every meter starts at once; SQLite's writers take turns, so none waits.
    sqlite = gov.ctx.engine.dialect.name == "sqlite"
    barrier = threading.Barrier(1 if sqlite else len(marks))
    failures: list[BaseException] = []

    def meter(until: datetime) -> None:
        try:
            with gov.session() as s:
                barrier.wait(30)
                metering.accrue_budgets(s, [budget], until)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=meter, args=(m,)) for m in marks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    with read_only(gov.ctx.sessions) as s:
        entries = s.execute(
            select(
                LedgerEntryRow.period_start, LedgerEntryRow.period_end, LedgerEntryRow.amount_usd
            ).order_by(LedgerEntryRow.period_start, LedgerEntryRow.id)
        ).all()
        recorded = (repo.get_pod(s, pod).recorded_usd, repo.get_budget(s, budget).recorded_usd)
    assert sum(amount for _, _, amount in entries) == recorded[0] == recorded[1] == D("4.20")
    for (_, end, _), (start, _, _) in pairwise(entries):
        assert end <= start, "two meters charged the same time"


def run_reads(statements: list[str]) -> list[str]:
    """The statements that read a run's row."""
    return [s for s in statements if s.lstrip().upper().startswith("SELECT") and " runs" in s]


def test_a_stop_acknowledgement_over_http_reads_its_run_once(
    gov: Governor, client: TestClient
) -> None:
    """An acknowledgement names its checkpoint: the beat's group leaves it to the full path
    without reading its run, and the full path reads it once."""
    run = fleet(gov, 1)[0]
    with gov.session() as s:
        pod_id = repo.get_run(s, run).pod_id
    with gov.session() as s:
        pod_service.stop_manually(s, gov.ctx, pod_id, "end of day", gov.clock.now(), by=BY)
    assert gov.beat(run).action is Action.STOP
    ack = {"step": 3, "status": "stopping", "checkpoint": {"step": 3, "path": "/ws/c3"}}
    with counted(gov) as statements:
        answer = client.post(f"/v1/runs/{run}/heartbeat", json=ack)
    assert answer.status_code == 200 and answer.json()["action"] == "stop", answer.text
    assert len(run_reads(statements)) == 1, statements
    with gov.session() as s:
        assert repo.get_run(s, run).checkpoint_path == "/ws/c3"


def test_a_beat_its_run_makes_not_plain_reads_its_run_twice_over_http(
    gov: Governor, client: TestClient
) -> None:
    """A step back (a restart from a checkpoint) is known only from the run: read once by the
    group, which leaves it to the full path, and once there."""
    run = fleet(gov, 1)[0]
    assert client.post(f"/v1/runs/{run}/heartbeat", json={"step": 9}).status_code == 200
    with counted(gov) as statements:
        answer = client.post(f"/v1/runs/{run}/heartbeat", json={"step": 4})
    assert answer.status_code == 200, answer.text
    assert len(run_reads(statements)) == 2, statements
    with gov.session() as s:
        assert repo.get_run(s, run).step == 4
