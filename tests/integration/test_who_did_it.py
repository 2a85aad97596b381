"""Every operator action names the token that took it, in the event's message and in its
evidence (`by`), over the API (SQLite and PostgreSQL): a token created, an extension
approved or denied, a pod stopped and resumed, a token revoked."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from governor.app import create_app
from governor.services.security import tokens
from governor.settings import load_settings
from tests.integration.api_scene import pilot
from tests.integration.conftest import Governor

BOOTSTRAP = "gov_op_who-did-it-bootstrap"


def made(response: httpx.Response, status: int = 201) -> Any:
    assert response.status_code == status, response.text[:500]
    return response.json()


@pytest.fixture
def api(gov: Governor) -> Iterator[TestClient]:
    with gov.session() as session:
        tokens.bootstrap_operator(session, BOOTSTRAP, gov.clock.now())
    settings = load_settings(database_url="sqlite://", scheduler_enabled=False)
    with TestClient(
        create_app(settings, gov.ctx), headers={"Authorization": f"Bearer {BOOTSTRAP}"}
    ) as client:
        yield client


def event_of(client: TestClient, subject: str, starting: str) -> dict[str, Any]:
    found = [
        e
        for e in made(client.get("/v1/events", params={"subject": subject}), 200)["items"]
        if e["message"].startswith(starting)
    ]
    assert len(found) == 1, found
    return found[0]


def test_an_approval_and_a_stop_name_the_token_that_made_them(api: TestClient) -> None:
    bootstrap_id = made(api.get("/v1/tokens"), 200)["items"][0]["id"]
    alice = made(api.post("/v1/tokens", json={"role": "operator", "label": "alice"}))
    created = event_of(api, f"token:{alice['id']}", f"Token {alice['id']}")
    assert created["message"] == (
        f"Token {alice['id']} (operator, alice) created by the bootstrap operator token "
        f"({bootstrap_id})."
    )
    assert created["evidence"]["by"] == {
        "token_id": bootstrap_id,
        "role": "operator",
        "label": "GOVERNOR_OPERATOR_TOKEN",
        "bootstrap": True,
        "teams": None,
    }

    scene = pilot(api, "pilot")
    as_alice = {"Authorization": f"Bearer {alice['token']}"}
    asked = made(
        api.post(
            f"/v1/budgets/{scene['budget']}/extensions",
            json={"amount_usd": "750", "reason": "one more epoch"},
        )
    )
    made(api.post(f"/v1/extensions/{asked['id']}/approve", headers=as_alice), 200)
    made(
        api.post(f"/v1/pods/{scene['pod']}/stop", json={"reason": "wrong image"}, headers=as_alice),
        202,
    )

    alice_said = f"operator token 'alice' ({alice['id']})"
    by_alice = {
        "token_id": alice["id"],
        "role": "operator",
        "label": "alice",
        "bootstrap": False,
        "teams": None,
    }
    approved = event_of(api, f"extension:{asked['id']}", "Extension of $750.00 approved")
    assert approved["message"].startswith(f"Extension of $750.00 approved by {alice_said}.")
    assert approved["evidence"]["by"] == by_alice
    stopped = event_of(api, f"pod:{scene['pod']}", "Pod stop asked")
    assert stopped["message"] == f"Pod stop asked by {alice_said}: wrong image"
    assert stopped["evidence"]["by"] == by_alice

    made(api.post(f"/v1/tokens/{alice['id']}/revoke"), 200)
    revoked = event_of(api, f"token:{alice['id']}", f"Token {alice['id']} (operator, alice) rev")
    assert revoked["evidence"]["by"]["token_id"] == bootstrap_id
    assert "revoked by the bootstrap operator token" in revoked["message"]


def test_a_denial_and_a_resume_name_the_token_that_made_them(
    api: TestClient, gov: Governor
) -> None:
    bob = made(api.post("/v1/tokens", json={"role": "operator", "label": "bob"}))
    as_bob = {"Authorization": f"Bearer {bob['token']}"}
    bob_said = f"operator token 'bob' ({bob['id']})"
    by_bob = {
        "token_id": bob["id"],
        "role": "operator",
        "label": "bob",
        "bootstrap": False,
        "teams": None,
    }
    scene = pilot(api, "pilot")

    asked = made(
        api.post(
            f"/v1/budgets/{scene['budget']}/extensions",
            json={"amount_usd": "750", "reason": "one more epoch"},
        )
    )
    made(api.post(f"/v1/extensions/{asked['id']}/deny", json={"note": "no"}, headers=as_bob), 200)
    denied = event_of(api, f"extension:{asked['id']}", "Extension of $750.00 denied")
    assert denied["message"] == f"Extension of $750.00 denied by {bob_said}: no."
    assert denied["evidence"]["by"] == by_bob

    made(api.post(f"/v1/pods/{scene['pod']}/stop", json={"reason": "lunch"}), 202)
    gov.tick(1)  # its job was never heard from: the provider is asked at once
    gov.tick(60)  # and has stopped it
    assert made(api.get(f"/v1/pods/{scene['pod']}"), 200)["state"] == "stopped"
    made(
        api.post(f"/v1/pods/{scene['pod']}/resume", json={"reason": "back"}, headers=as_bob),
        200,
    )
    resumed = event_of(api, f"pod:{scene['pod']}", "Pod resume asked")
    assert resumed["message"].startswith(f"Pod resume asked by {bob_said}: back.")
    assert resumed["evidence"]["by"] == by_bob
