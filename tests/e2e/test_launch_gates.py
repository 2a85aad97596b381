"""The launch gates over real HTTP, called by the launchers' own policy clients: SkyPilot's
`RestfulAdminPolicy` and dstack's `rest_plugin`, each from its own virtualenv.

An affordable launch is accepted and labelled, and reserves its priced maximum beside the
budget's committed spend until its pod registers with the launch id (or the reservation
expires); an unaffordable one, and one without an admitted plan where the budget requires
one, are refused with the reasons the user sees. The launched job claims its run once.
"""

from __future__ import annotations

import json
import os
from decimal import Decimal
from typing import Any

import httpx
import pytest

from governor.client.core import Governor, GovernorError, claim
from tests.e2e.conftest import (
    GovernorServer,
    ServerFactory,
    assert_error,
    declare_budget,
    ok,
    wait_for,
)
from tests.e2e.launchers import tools

pytestmark = pytest.mark.e2e

RATE_CARD = {"aws:H100": "4.00", "aws:H100:spot": "2.00", "gcp:A100": "3.00"}
H100_SPOT = {"accelerators": {"H100": 8}, "use_spot": True, "infra": "aws/us-east-1"}


@pytest.fixture
def gated(start_server: ServerFactory) -> GovernorServer:
    return start_server(GOVERNOR_RATE_CARD=json.dumps(RATE_CARD), GOVERNOR_ACCESS_LOG="true")


def gate_url(operator: httpx.Client, server: GovernorServer) -> tuple[str, str]:
    token = ok(operator.post("/v1/tokens", json={"role": "gate", "label": "sky"}), 201)["token"]
    return token, f"{server.url}/v1/gates/{token}"


def reserved(operator: httpx.Client, budget_id: str) -> Decimal:
    return Decimal(ok(operator.get(f"/v1/budgets/{budget_id}"))["reserved_for_launches_usd"])


def labelled(budget: dict[str, Any], **alternative: Any) -> dict[str, Any]:
    return {**alternative, "labels": {"governor-budget": budget["name"]}}


def test_skypilot_launch_accepted_labelled_reserved_and_claimed_once(
    gated: GovernorServer, operator: httpx.Client
) -> None:
    token, gate = gate_url(operator, gated)
    budget = declare_budget(operator, "500")
    answer = tools.skypilot(
        f"{gate}/skypilot",
        resources=[labelled(budget, **H100_SPOT)],
        envs={"GOVERNOR_MAX_HOURS": "10"},
    )
    assert answer["accepted"], answer
    launch_id = answer["labels"]["governor-launch"]
    assert answer["labels"]["governor-budget"] == budget["id"]
    claim = answer["envs"]["GOVERNOR_CLAIM"]
    assert claim.startswith("gov_claim_")
    assert answer["envs"]["GOVERNOR_URL"] == gated.url

    # 8 GPUs x $2.00 spot x 1 node x 10 h: reserved beside committed spend, not in it
    figures = ok(operator.get(f"/v1/budgets/{budget['id']}"))
    assert Decimal(figures["reserved_for_launches_usd"]) == Decimal("160")
    assert Decimal(figures["committed_usd"]) == Decimal(0)
    launch = ok(operator.get(f"/v1/launches/{launch_id}"))
    assert launch["figures"]["arithmetic"].startswith("8 x H100 at $2.00/h per GPU")
    assert launch["figures"]["arithmetic"].endswith("= $160.00")

    # a recovery relaunch labelled with the accepted launch passes through, reserving nothing
    relabelled = {**H100_SPOT, "labels": answer["labels"]}
    again = tools.skypilot(f"{gate}/skypilot", resources=[relabelled])
    assert again["accepted"] and "GOVERNOR_CLAIM" not in again["envs"]
    assert reserved(operator, budget["id"]) == Decimal(160)

    # the next launch is judged against what is left: $500 - $160
    refused = tools.skypilot(
        f"{gate}/skypilot",
        resources=[labelled(budget, accelerators={"H100": 8}, infra="aws")],
        envs={"GOVERNOR_MAX_HOURS": "11"},
    )
    assert not refused["accepted"]
    assert "8 x H100 at $4.00/h per GPU" in refused["error"]
    assert "$352.00, more than budget" in refused["error"]
    assert "$160.00 reserved for launches = $340.00" in refused["error"]

    # the job claims too early: kept, retry
    early = assert_error(operator.post("/v1/runs/claim", json={"claim": claim}), 409)
    assert "not registered yet" in early["message"]

    pod = ok(
        operator.post(
            f"/v1/budgets/{budget['id']}/pods",
            json={"provider": "fake", "provider_ref": "sky-1", "launch": launch_id},
        ),
        201,
    )
    assert pod["launch_id"] == launch_id
    assert reserved(operator, budget["id"]) == 0
    released = ok(operator.get(f"/v1/launches/{launch_id}"))
    assert released["release_reason"] == "pod-appeared"

    with httpx.Client(base_url=gated.url, timeout=30) as anyone:
        run = ok(anyone.post("/v1/runs/claim", json={"claim": claim, "total_steps": 10}), 201)
        assert run["pod_id"] == pod["id"] and run["budget_id"] == budget["id"]
        again = assert_error(anyone.post("/v1/runs/claim", json={"claim": claim}), 409)
        assert "already used" in again["message"]
        assert_error(anyone.post("/v1/runs/claim", json={"claim": "gov_claim_nope"}), 404)
    beat = httpx.post(
        f"{gated.url}/v1/runs/{run['id']}/heartbeat",
        json={"step": 1},
        headers={"Authorization": f"Bearer {run['token']}"},
    )
    assert beat.status_code == 200, beat.text

    # the gate token opens the gates alone, and never shows in the access log
    with gated.client(token) as gate_token:
        assert_error(gate_token.get("/v1/budgets"), 403)
    assert token not in gated.output()
    assert "/v1/gates/***/skypilot" in gated.output()


def test_skypilot_refuses_unaffordable_unplanned_and_unknown_launches(
    gated: GovernorServer, operator: httpx.Client
) -> None:
    _, gate = gate_url(operator, gated)
    budget = declare_budget(operator, "100")
    two_clouds = [
        labelled(budget, accelerators={"A100": 8}, infra="gcp"),
        labelled(budget, accelerators={"H100": 8}, infra="aws"),
    ]
    refused = tools.skypilot(f"{gate}/skypilot", resources=two_clouds, num_nodes=2)
    assert not refused["accepted"]
    forged = [{**r, "labels": {**r["labels"], "governor-launch": "lch_forged"}} for r in two_clouds]
    assert not tools.skypilot(f"{gate}/skypilot", resources=forged, num_nodes=2)["accepted"]
    # priced at its dearest candidate, for the server's default 24 hours
    assert (
        "8 x H100 at $4.00/h per GPU (rate card aws:h100) x 2 nodes x 24 h = $1,536.00"
        in (refused["error"])
    )
    assert reserved(operator, budget["id"]) == 0

    planned = ok(
        operator.post(
            "/v1/budgets",
            json={"name": "needs-a-plan", "ceiling_usd": "1000", "require_plan": True},
        ),
        201,
    )
    unplanned = tools.skypilot(f"{gate}/skypilot", resources=[labelled(planned, **H100_SPOT)])
    assert not unplanned["accepted"]
    assert "requires an admitted plan and has none" in unplanned["error"]

    unpriced = tools.skypilot(
        f"{gate}/skypilot",
        resources=[labelled(budget, accelerators={"B200": 1}, infra="lambda")],
        envs={"GOVERNOR_MAX_HOURS": "1"},
    )
    assert unpriced["accepted"], unpriced  # not a require_plan budget: let through, told
    events = ok(operator.get("/v1/events", params={"budget_id": budget["id"]}))["items"]
    assert any("unpriced" in e["message"] and e["severity"] == "warning" for e in events)

    nobody = tools.skypilot(f"{gate}/skypilot", resources=[H100_SPOT])
    assert "no budget for this launch" in nobody["error"]

    wrong = tools.skypilot(f"{gated.url}/v1/gates/gov_gate_wrong/skypilot", resources=[H100_SPOT])
    assert not wrong["accepted"] and "failed" in wrong  # fail-closed: SkyPilot refuses it
    assert "gov_gate_wrong" not in gated.output()


def test_a_reservation_no_pod_claims_is_released_after_its_time(
    start_server: ServerFactory,
) -> None:
    server = start_server(
        GOVERNOR_RATE_CARD=json.dumps(RATE_CARD), GOVERNOR_LAUNCH_RESERVATION_TTL_S="1"
    )
    with server.client() as operator:
        _, gate = gate_url(operator, server)
        budget = declare_budget(operator, "500")
        answer = tools.skypilot(
            f"{gate}/skypilot",
            resources=[labelled(budget, **H100_SPOT)],
            envs={"GOVERNOR_MAX_HOURS": "1"},
        )
        assert answer["accepted"], answer
        launch_id = answer["labels"]["governor-launch"]
        wait_for(
            lambda: ok(operator.get(f"/v1/launches/{launch_id}"))["release_reason"] == "expired",
            "the reservation to expire",
        )
        assert reserved(operator, budget["id"]) == 0


def test_the_client_claims_its_run_from_its_environment(
    gated: GovernorServer, operator: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, gate = gate_url(operator, gated)
    budget = declare_budget(operator, "500")
    answer = tools.skypilot(
        f"{gate}/skypilot",
        resources=[labelled(budget, **H100_SPOT)],
        envs={"GOVERNOR_MAX_HOURS": "1"},
    )
    launch_id = answer["labels"]["governor-launch"]
    ok(
        operator.post(
            f"/v1/budgets/{budget['id']}/pods",
            json={"provider": "fake", "provider_ref": "sky-2", "launch": launch_id},
        ),
        201,
    )
    for name in ("GOVERNOR_RUN_ID", "GOVERNOR_JOB_TOKEN", "GOVERNOR_TOKEN"):
        # set, then removed: undone after the test, with what the claim writes to the
        # environment for the job's other processes (a later test's job must not read it)
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setenv("GOVERNOR_URL", answer["envs"]["GOVERNOR_URL"])
    monkeypatch.setenv("GOVERNOR_CLAIM", answer["envs"]["GOVERNOR_CLAIM"])
    with Governor.from_env() as governor:
        assert governor.run_id.startswith("run_")
        assert not governor.heartbeat(1).should_stop
    assert os.environ["GOVERNOR_RUN_ID"] == governor.run_id  # for the job's other processes
    with pytest.raises(GovernorError, match="already used"):
        claim(gated.url, answer["envs"]["GOVERNOR_CLAIM"])


def test_dstack_run_accepted_once_clamped_and_refused_with_reasons(
    gated: GovernorServer, operator: httpx.Client
) -> None:
    _, gate = gate_url(operator, gated)
    budget = declare_budget(operator, "500")
    run = {
        "type": "task",
        "commands": ["python train.py"],
        "nodes": 2,
        "resources": {"gpu": "H100:8"},
        "spot_policy": "spot",
        "backends": ["aws"],
        "max_duration": "5h",
        "tags": {"governor-budget": budget["name"]},
    }
    # plan time, then apply time, with the same spec: reserved once
    answer = tools.dstack(f"{gate}/dstack", run, times=2)
    assert answer["accepted"], answer
    assert answer["tags"]["governor-budget"] == budget["id"]
    assert answer["tags"]["governor-launch"].startswith("lch_")
    assert answer["env"]["GOVERNOR_CLAIM"].startswith("gov_claim_")
    assert answer["max_duration"] == 5 * 3600  # as asked: kept
    assert Decimal(str(answer["max_price"])) == Decimal(16)  # 8 x $2.00 an instance-hour
    # 8 x $2.00 x 2 nodes x 5 h
    assert reserved(operator, budget["id"]) == Decimal(160)

    unbounded = {**run, "max_duration": None, "nodes": 1, "resources": {"gpu": "H100:1"}}
    clamped = tools.dstack(f"{gate}/dstack", unbounded, times=1)
    assert clamped["max_duration"] == 24 * 3600  # the hours it was priced for
    assert reserved(operator, budget["id"]) == Decimal(160 + 48)

    dear = {**run, "spot_policy": "on-demand", "max_duration": "2d"}
    refused = tools.dstack(f"{gate}/dstack", dear, times=1)
    assert not refused["accepted"]
    assert "8 x H100 at $4.00/h per GPU (rate card aws:h100) x 2 nodes x 48 h" in refused["error"]
    assert "more than budget" in refused["error"]

    planned = ok(
        operator.post(
            "/v1/budgets", json={"name": "dstack-plan", "ceiling_usd": "900", "require_plan": True}
        ),
        201,
    )
    unplanned = tools.dstack(
        f"{gate}/dstack", {**run, "tags": {"governor-budget": planned["name"]}}, times=1
    )
    assert "requires an admitted plan" in unplanned["error"]


def test_a_gate_token_for_a_team_finds_that_teams_budgets_alone(
    gated: GovernorServer, operator: httpx.Client
) -> None:
    for team in ("alpha", "beta"):
        ok(operator.post("/v1/teams", json={"name": team}), 201)
    body = {"role": "gate", "label": "alpha's launches", "teams": ["alpha"]}
    token = ok(operator.post("/v1/tokens", json=body), 201)["token"]
    gate = f"{gated.url}/v1/gates/{token}"
    ours = ok(
        operator.post("/v1/budgets", json={"name": "a-1", "ceiling_usd": "500", "team": "alpha"}),
        201,
    )
    theirs = ok(
        operator.post("/v1/budgets", json={"name": "b-1", "ceiling_usd": "500", "team": "beta"}),
        201,
    )
    hours = {"GOVERNOR_MAX_HOURS": "2"}
    accepted = tools.skypilot(
        f"{gate}/skypilot", resources=[labelled(ours, **H100_SPOT)], envs=hours
    )
    assert accepted["accepted"], accepted
    refused = tools.skypilot(
        f"{gate}/skypilot", resources=[labelled(theirs, **H100_SPOT)], envs=hours
    )
    assert not refused["accepted"]
    assert "no open budget 'b-1'" in refused["error"]  # as one that does not exist
    assert reserved(operator, theirs["id"]) == 0 and reserved(operator, ours["id"]) > 0

    # a relaunch through another team's gate naming this launch passes no more than a forged
    # one: it is judged, and that team's gate finds no budget of alpha's
    body = {"role": "gate", "label": "beta's launches", "teams": ["beta"]}
    beta_gate = f"{gated.url}/v1/gates/{ok(operator.post('/v1/tokens', json=body), 201)['token']}"
    ours_launch = accepted["labels"]["governor-launch"]
    relaunch = labelled(ours, **H100_SPOT)
    relaunch["labels"] = {**relaunch["labels"], "governor-launch": ours_launch}
    passed = tools.skypilot(f"{beta_gate}/skypilot", resources=[relaunch], envs=hours)
    assert not passed["accepted"] and "no open budget 'a-1'" in passed["error"], passed
    again = tools.skypilot(f"{gate}/skypilot", resources=[relaunch], envs=hours)
    assert again["accepted"] and again["labels"]["governor-launch"] == ours_launch  # unchanged
