"""`governor ext request|list|approve|deny`: the request each sends, and what it prints."""

from __future__ import annotations

import pytest

from tests.unit.cli.scripted import (
    BUDGET_ID,
    EXTENSION_ID,
    Governor,
    body,
    budget_out,
    extension_out,
    page,
)

HEADER = "id                    budget  amount  state    by        reason         decided  note"


def test_request_posts_the_amount_and_reason_and_shows_the_request(governor: Governor) -> None:
    governor.has("/v1/budgets", budget_out())
    governor.answer("POST", f"/v1/budgets/{BUDGET_ID}/extensions", extension_out(), status=201)
    ran = governor.run("ext", "request", "pilot", "--amount", "50", "--reason", "one more eval")
    assert ran.sent == [
        ("GET", "/v1/budgets?name=pilot&limit=1000"),
        ("POST", f"/v1/budgets/{BUDGET_ID}/extensions"),
        ("GET", "/v1/budgets?limit=1000"),
    ]
    assert body(ran.requests[1]) == {"amount_usd": "50", "reason": "one more eval"}
    assert ran.code == 0
    assert ran.out.splitlines() == [
        HEADER,
        f"{EXTENSION_ID}  pilot   $50.00  pending  operator  one more eval  -        -",
    ]


@pytest.mark.parametrize(("decision", "state"), [("approve", "approved"), ("deny", "denied")])
def test_a_decision_posts_its_note_to_its_own_path(
    governor: Governor, decision: str, state: str
) -> None:
    decided = extension_out(
        state=state, decided_at="2026-04-01T11:00:00+00:00", decision_note="fine"
    )
    governor.has("/v1/budgets", budget_out())
    governor.answer("POST", f"/v1/extensions/{EXTENSION_ID}/{decision}", decided)
    ran = governor.run("ext", decision, EXTENSION_ID, "--note", "fine")
    assert ran.sent == [
        ("POST", f"/v1/extensions/{EXTENSION_ID}/{decision}"),
        ("GET", "/v1/budgets?limit=1000"),
    ]
    assert body(ran.requests[0]) == {"note": "fine"}
    assert ran.out.splitlines()[1].split()[3] == state
    assert ran.out.splitlines()[1].endswith("2026-04-01T11:00:00+00:00  fine")
    assert body(governor.run("ext", decision, EXTENSION_ID).requests[0]) == {}


def test_list_narrowed_to_a_budget_and_a_state(governor: Governor) -> None:
    governor.has("/v1/budgets", budget_out())
    governor.answer("GET", "/v1/extensions", page(extension_out()))
    ran = governor.run("ext", "list", "--budget", "pilot", "--state", "pending")
    assert ran.sent == [
        ("GET", "/v1/budgets?name=pilot&limit=1000"),
        ("GET", f"/v1/extensions?budget_id={BUDGET_ID}&state=pending&limit=100"),
        ("GET", "/v1/budgets?limit=1000"),
    ]
    assert ran.out.splitlines()[0] == HEADER
