"""Text that cannot pass for other text, on SQLite and PostgreSQL: a name or a reason carrying
a character that does not show what it is (a bidirectional override, a zero-width or format
character, a C1 control, a line separator) is refused with a 422 that names it and where it
stands; the same characters in text the governor did not check itself (rows written to the
database by other hands, a provider's words in an event) are shown as their escapes on the
dashboard and in the report, never as themselves."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from governor.db.tables import BudgetRow, PodRow
from governor.domain.model import Category, Severity
from governor.services import events
from tests.integration.api_scene import pilot
from tests.integration.conftest import OPERATOR, Governor, ok

# one of each kind refused in a name, with how its 422 names it
REFUSED = {
    "\u202e": "format character U+202E (RIGHT-TO-LEFT OVERRIDE)",
    "\u2066": "format character U+2066 (LEFT-TO-RIGHT ISOLATE)",
    "\u200b": "format character U+200B (ZERO WIDTH SPACE)",
    "\ufeff": "format character U+FEFF",
    "\u0085": "control character U+0085",
    "\x7f": "control character U+007F",
    "\u2028": "line separator U+2028",
    "\u2029": "paragraph separator U+2029",
}


def _create_routes(ids: dict[str, str]) -> dict[str, tuple[str, dict[str, Any], str]]:
    """Each route that names something, with a body whose named field carries `{c}`."""
    return {
        "budget name": ("/v1/budgets", {"name": "b{c}x", "ceiling_usd": "5"}, "name"),
        "pod name": (
            f"/v1/budgets/{ids['budget']}/pods",
            {"provider": "fake", "provider_ref": "pod-z", "name": "p{c}x"},
            "name",
        ),
        "pod provider_ref": (
            f"/v1/budgets/{ids['budget']}/pods",
            {"provider": "fake", "provider_ref": "p{c}x"},
            "provider_ref",
        ),
        "run name": (
            f"/v1/budgets/{ids['budget']}/runs",
            {"name": "r{c}x", "pod_id": ids["pod"]},
            "name",
        ),
        "token label": ("/v1/tokens", {"role": "viewer", "label": "t{c}x"}, "label"),
        "budget note": ("/v1/budgets", {"name": "n", "ceiling_usd": "5", "note": "a{c}x"}, "note"),
    }


def _with(body: dict[str, Any], character: str) -> dict[str, Any]:
    return {k: v.replace("{c}", character) if isinstance(v, str) else v for k, v in body.items()}


def test_a_name_or_a_note_with_a_character_that_hides_is_refused_saying_which(
    client: TestClient,
) -> None:
    ids = pilot(client, "a")
    wrong = []
    for what, (path, body, field) in _create_routes(ids).items():
        for character, named in REFUSED.items():
            response = client.post(path, json=_with(body, character))
            error = response.json()["error"]
            details = {d["field"]: d["problem"] for d in error.get("details", [])}
            if response.status_code != 422 or f"{named}" not in details.get(field, ""):
                wrong.append(f"{what} with U+{ord(character):04X}: {response.text[:300]}")
            elif "at character 1" not in details[field]:
                wrong.append(f"{what}: the position is not named: {details[field]}")
    assert not wrong, "\n".join(wrong)


def test_free_text_keeps_its_lines_and_joiners_and_a_name_does_not(client: TestClient) -> None:
    note = "line one\n\tline two: \U0001f468\u200d\U0001f469\u200d\U0001f467, \u0646\u200c\u0627"
    made = ok(client.post("/v1/budgets", json={"name": "n", "ceiling_usd": "5", "note": note}), 201)
    assert made["note"] == note
    refused = client.post("/v1/budgets", json={"name": "a\u200db", "ceiling_usd": "5"})
    assert refused.status_code == 422, refused.text
    assert "U+200D (ZERO WIDTH JOINER) at character 1" in refused.json()["error"]["message"]


def _signed_in(client: TestClient) -> None:
    response = client.post("/login", data={"token": OPERATOR}, follow_redirects=False)
    assert response.status_code == 303, response.text[:300]


def test_text_the_governor_did_not_check_is_shown_escaped(
    gov: Governor, client: TestClient
) -> None:
    budget = gov.budget(ceiling="1000")
    pod = gov.pod(budget)
    with gov.session() as s:
        s.execute(update(BudgetRow).where(BudgetRow.id == budget).values(name="ops\u202egpj.exe"))
        s.execute(update(PodRow).where(PodRow.id == pod).values(name="h100\u200b\u2066x\u0085"))
        events.record(
            s,
            gov.clock.now(),
            Severity.WARNING,
            Category.PROVIDER,
            f"pod:{pod}",
            "the provider refused: quota\u202e \ufeffexceeded",
            budget_id=budget,
        )
    _signed_in(client)
    shown = {
        "the dashboard": client.get("/status"),
        "the budget's page": client.get(f"/status/budgets/{budget}"),
        "the report in HTML": client.get(f"/v1/budgets/{budget}/report", params={"format": "html"}),
        "the report in Markdown": client.get(
            f"/v1/budgets/{budget}/report", params={"format": "md"}
        ),
    }
    for where, response in shown.items():
        assert response.status_code == 200, (where, response.text[:300])
        text = response.text
        for hiding in "\u202e\u200b\u2066\u0085\ufeff":
            assert hiding not in text, f"{where} shows U+{ord(hiding):04X} as itself"
        assert "ops\\u202egpj.exe" in text, where
        if where != "the dashboard":  # the dashboard lists the budget's latest events elsewhere
            assert "quota\\u202e \\ufeffexceeded" in text, where
        assert "h100\\u200b\\u2066x\\u0085" in text, where
    # the API's JSON carries the text as it is stored: escaping is for people reading it
    assert ok(client.get(f"/v1/budgets/{budget}"))["name"] == "ops\u202egpj.exe"


@pytest.mark.parametrize("character", ["\u202e", "\x85"], ids=["bidi", "c1"])
def test_a_url_carrying_a_character_that_hides_is_refused(
    client: TestClient, character: str
) -> None:
    response = client.get("/v1/budgets", params={"name": f"x{character}"})
    assert response.status_code == 422, response.text
    assert f"U+{ord(character):04X}" in response.json()["error"]["message"]
