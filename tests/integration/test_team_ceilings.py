"""A team's ceiling per period, on SQLite and PostgreSQL, over the API: a budget is declared
(or extended) only within what its team has left in the period, refused with the figures;
a team reaching its ceiling has its pods stopped after a save, its budgets stay open but are
held (no new pod, run or resume), and its next period, in its time zone, opens it again
without resuming anything."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from governor.db import repository as repo
from governor.domain.errors import Conflict
from governor.domain.model import Action, BudgetState, PodState, Reason, RunStatus
from governor.services.jobs.checkins import Checkpoint
from tests.integration.conftest import OPERATOR, Governor, ok

# 22:00 in Berlin on the last day of January: its month ends at 23:00 UTC
LATE_JANUARY = datetime(2026, 1, 31, 21, 0, tzinfo=UTC)


def team_with_ceiling(client: TestClient, ceiling: str, **period: Any) -> dict[str, Any]:
    team = ok(client.post("/v1/teams", json={"name": "vision", "time_zone": "Europe/Berlin"}), 201)
    body = {"ceiling_usd": ceiling, "reason": "the lab's monthly GPU money", **period}
    return dict(ok(client.post(f"/v1/teams/{team['id']}/ceiling", json=body)))


def declare(client: TestClient, name: str, ceiling: str, team: str = "vision") -> Any:
    return client.post("/v1/budgets", json={"name": name, "ceiling_usd": ceiling, "team": team})


def conflict(response: Any) -> str:
    assert response.status_code == 409, response.text[:500]
    return str(response.json()["error"]["message"])


def test_a_budget_beyond_what_the_team_has_left_this_month_is_refused_with_the_figures(
    client: TestClient, gov: Governor
) -> None:
    gov.clock.current = LATE_JANUARY
    team = team_with_ceiling(client, "2.00")
    period = team["period"]
    assert (period["start"], period["end"]) == ("2025-12-31T23:00:00Z", "2026-01-31T23:00:00Z")
    assert (period["ceiling_usd"], period["left_usd"], period["held"]) == ("2.00", "2.00", False)
    message = conflict(declare(client, "too-big", "2.50"))
    assert "a budget's ceiling of $2.50 is more than the team has left this period" in message
    assert "$2.00 = ceiling $2.00 - spent $0.00" in message
    budget = ok(declare(client, "fits", "1.00"), 201)  # declaring allocates nothing
    ok(declare(client, "fits-too", "2.00"), 201)
    assert budget["team_id"] == team["id"]
    names = sorted(b["name"] for b in ok(client.get("/v1/budgets"))["items"])
    assert names == ["fits", "fits-too"]  # the refused one wrote nothing
    # a ceiling is declared once; an approved extension raises it for the period
    again = {"ceiling_usd": "9", "reason": "more"}
    assert "already" in conflict(client.post(f"/v1/teams/{team['id']}/ceiling", json=again))
    asked = ok(
        client.post(
            f"/v1/teams/{team['id']}/extensions", json={"amount_usd": "1", "reason": "a sweep"}
        ),
        201,
    )
    conflict(declare(client, "still-too-big", "2.50"))  # pending changes nothing
    decided = ok(client.post(f"/v1/teams/{team['id']}/extensions/{asked['id']}/approve"))
    assert decided["state"] == "approved"
    ok(declare(client, "now-it-fits", "2.50"), 201)
    refused = client.post(f"/v1/teams/{team['id']}/extensions/{asked['id']}/deny")
    assert "already approved" in conflict(refused)


def test_a_budget_extension_beyond_what_the_team_has_left_is_refused(
    client: TestClient, gov: Governor
) -> None:
    gov.clock.current = LATE_JANUARY
    team_with_ceiling(client, "2.00")
    budget = ok(declare(client, "pilot", "1.00"), 201)
    ask = {"amount_usd": "2.50", "reason": "longer run"}
    extension = ok(client.post(f"/v1/budgets/{budget['id']}/extensions", json=ask), 201)
    message = conflict(client.post(f"/v1/extensions/{extension['id']}/approve", json={}))
    assert f"extension {extension['id']} of $2.50 is more than the team has left" in message
    assert ok(client.get(f"/v1/budgets/{budget['id']}"))["effective_ceiling_usd"] == "1.00"


@pytest.fixture
def two_pods(client: TestClient, gov: Governor) -> dict[str, Any]:
    """Team vision ($1.00 a month, Berlin) with two budgets of $1.00, each a $3.60/h pod
    running a job with a 60 s checkpoint grace: the team's committed spend is its spend plus
    $0.11 a pod (3.60/h over 60 s grace, 30 s stop latency and 20 s reaction)."""
    gov.clock.current = LATE_JANUARY
    team = team_with_ceiling(client, "1.00")
    budgets = [ok(declare(client, name, "1.00"), 201)["id"] for name in ("a", "b")]
    pods = [gov.pod(b, ref=f"pod-{i}") for i, b in enumerate(budgets)]
    runs = [gov.run(b, p, grace_s=60, timeout_s=3600) for b, p in zip(budgets, pods, strict=True)]
    return {"team": team["id"], "budgets": budgets, "pods": pods, "runs": runs}


def test_a_team_at_its_months_ceiling_stops_its_pods_after_a_save_and_its_next_month_opens_it(
    client: TestClient, gov: Governor, two_pods: dict[str, Any]
) -> None:
    team, budgets, pods, runs = (two_pods[k] for k in ("team", "budgets", "pods", "runs"))
    gov.tick(300)  # spent 0.60, committed 0.82: each budget alone is at 0.41 of its 1.00
    assert [gov.beat(r, step=5).action for r in runs] == [Action.CONTINUE] * 2
    gov.tick(60)  # committed 0.94 of the team's 1.00: save first
    for run in runs:
        directive = gov.beat(run, step=6)
        assert (directive.action, directive.reason) == (Action.CHECKPOINT, Reason.PRE_STOP)
        assert "team's committed spend" in (directive.message or "")
        # the heartbeat's figures are the earlier stop's: the team's, not the budget's
        assert directive.budget.remaining < directive.budget.effective_ceiling / 2
    gov.tick(60)  # committed 1.06: the team's ceiling is reached
    stops = [gov.beat(r, step=7) for r in runs]
    for directive in stops:
        assert (directive.action, directive.reason) == (Action.STOP, Reason.TEAM_CEILING)
        assert directive.deadline == gov.clock.now() + timedelta(seconds=60)  # time to save
    assert ok(client.get(f"/v1/teams/{team}"))["period"]["held"] is True
    mine = ok(client.get("/v1/status", params={"team": "vision"}))
    assert mine["team_id"] == team and [t["id"] for t in mine["teams"]] == [team]
    assert sorted(b["id"] for b in mine["budgets"]) == sorted(budgets)
    org = ok(client.get("/v1/status"))
    assert [t["name"] for t in org["teams"]] == ["default", "vision"] and org["team_id"] is None
    [vision] = [t for t in org["teams"] if t["id"] == team]
    assert vision["period"]["held"] is True
    assert Decimal(vision["period"]["spent_usd"]) == Decimal("0.84")
    assert Decimal(vision["period"]["forecast_usd"]) > Decimal("0.84")  # it still burns
    assert client.post("/login", data={"token": OPERATOR}, follow_redirects=False).is_redirect
    page = client.get("/status", params={"team": "vision"}).text
    assert f'data-team-id="{team}"' in page and 'data-field="team-hold"' in page
    assert 'data-team-id="team_default"' not in page  # that team alone
    assert all(f'data-budget-id="{b}"' in page for b in budgets)
    for run in runs:
        gov.beat(run, step=7, status=RunStatus.STOPPING, checkpoint=Checkpoint(7, "/ws/ckpt-7"))
    gov.tick(1)
    gov.tick(30)
    with gov.session() as s:
        assert [repo.get_pod(s, p).state for p in pods] == [PodState.STOPPED] * 2
        assert [repo.get_budget(s, b).state for b in budgets] == [BudgetState.OPEN] * 2
    # held: no new pod, run or resume in any of the team's budgets
    with pytest.raises(Conflict, match="reached its ceiling this period: no new pod"):
        gov.pod(budgets[0], ref="pod-late")
    resumed = client.post(f"/v1/pods/{pods[0]}/resume", json={"reason": "finish the epoch"})
    assert "no resume until its next period starts at 2026-01-31 23:00 UTC" in conflict(resumed)

    gov.clock.current = datetime(2026, 1, 31, 23, 0, tzinfo=UTC)  # February in Berlin
    gov.tick()
    february = ok(client.get(f"/v1/teams/{team}"))["period"]
    assert (february["start"], february["held"], february["spent_usd"]) == (
        "2026-01-31T23:00:00Z",
        False,
        "0.00",
    )
    with gov.session() as s:  # nothing resumed by itself
        assert [repo.get_pod(s, p).state for p in pods] == [PodState.STOPPED] * 2
    fresh = gov.pod(budgets[0], ref="pod-february")
    gov.run(budgets[0], fresh)

    january = ok(client.get(f"/v1/teams/{team}/report", params={"period": "2026-01-31"}))
    assert (january["period_start"], january["period_end"], january["current"]) == (
        "2025-12-31T23:00:00Z",
        "2026-01-31T23:00:00Z",
        False,
    )
    assert january["ceiling_usd"] == "1.00"
    assert sorted(b["budget_id"] for b in january["budgets"]) == sorted(budgets)
    assert Decimal(january["spent_usd"]) == sum(
        (Decimal(b["spent_usd"]) for b in january["budgets"]), Decimal(0)
    )
    assert Decimal("0.84") <= Decimal(january["spent_usd"]) <= Decimal("1.00")
    now = ok(client.get(f"/v1/teams/{team}/report"))
    assert (now["period_start"], now["current"], now["spent_usd"]) == (
        "2026-01-31T23:00:00Z",
        True,
        "0.00",
    )
    ahead = client.get(f"/v1/teams/{team}/report", params={"period": "2026-03-02"})
    assert "has not begun" in conflict(ahead)


def checkpoints_asked(client: TestClient, run: str) -> list[str]:
    """Each pre-stop checkpoint asked of the run, oldest first: `budget` or `team`."""
    events = ok(client.get("/v1/events", params={"subject": f"run:{run}"}))["items"]
    asked = [
        e["message"] for e in reversed(events) if "Checkpoint requested (pre-stop)" in e["message"]
    ]
    return ["team" if "team's committed spend" in m else "budget" for m in asked]


def test_a_budgets_pre_stop_checkpoint_does_not_spare_the_teams_one(
    client: TestClient, gov: Governor
) -> None:
    """Budget and team both at $1.00, the budget with a $0.05 reserve, one $3.60/h pod whose
    stop costs $0.11: the budget's committed spend passes 90% at $0.74 spent, the team's at
    $0.79; each asks for its checkpoint once."""
    gov.clock.current = LATE_JANUARY
    team_with_ceiling(client, "1.00")
    body = {"name": "a", "ceiling_usd": "1.00", "reserve_usd": "0.05", "team": "vision"}
    budget = ok(client.post("/v1/budgets", json=body), 201)["id"]
    run = gov.run(budget, gov.pod(budget), grace_s=60, timeout_s=3600)
    gov.tick(750)
    assert checkpoints_asked(client, run) == ["budget"]
    gov.beat(run, step=7, status=RunStatus.CHECKPOINTING, checkpoint=Checkpoint(7, "/ws/ckpt-7"))
    gov.tick(50)  # $0.80 spent: the team's committed spend passes 90% of its ceiling
    directive = gov.beat(run, step=8)
    assert (directive.action, directive.reason) == (Action.CHECKPOINT, Reason.PRE_STOP)
    assert "team's committed spend" in (directive.message or "")
    gov.tick(20)
    assert checkpoints_asked(client, run) == ["budget", "team"]


def test_a_teams_pre_stop_checkpoint_does_not_spare_the_budgets_own(
    client: TestClient, gov: Governor
) -> None:
    """Team and budget a both at $1.00; budget b's pod, stopped as soon as it ran, spent
    $0.031 of the team's month (its stop's latency). With budget a's $3.60/h pod counted at
    $0.11 to stop in its budget and $0.16 in its team, the team's committed spend passes 90%
    some 80 s before budget a's, and reaches its ceiling some 20 s after; each asks once."""
    gov.clock.current = LATE_JANUARY
    team_with_ceiling(client, "1.00")
    a, b = (ok(declare(client, name, "1.00"), 201)["id"] for name in ("a", "b"))
    early = gov.pod(b, ref="pod-b")
    ok(client.post(f"/v1/pods/{early}/stop", json={"reason": "done"}), 202)
    gov.tick(1)
    gov.tick(30)  # the fake cloud's stop latency
    with gov.session() as s:
        assert repo.get_pod(s, early).state is PodState.STOPPED
    run = gov.run(a, gov.pod(a), grace_s=60, timeout_s=3600)
    gov.tick(650)  # the team at $0.841 committed: 84%
    assert checkpoints_asked(client, run) == []
    gov.tick(65)  # the team at $0.906 committed: past 90%; budget a at $0.825
    assert checkpoints_asked(client, run) == ["team"]
    gov.beat(run, step=7, status=RunStatus.CHECKPOINTING, checkpoint=Checkpoint(7, "/ws/ckpt-7"))
    gov.tick(80)  # budget a at $0.905 committed: its own 90%; the team at $0.986
    directive = gov.beat(run, step=8)
    assert (directive.action, directive.reason) == (Action.CHECKPOINT, Reason.PRE_STOP)
    assert "team's" not in (directive.message or "")
    gov.tick(5)
    assert checkpoints_asked(client, run) == ["team", "budget"]
