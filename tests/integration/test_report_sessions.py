"""The run report a dashboard card links to opens in a signed-in browser: the dashboard's
session cookie stands for its token on the report route, as on the pages; without a session
or a bearer token it is refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from governor.app import create_app
from governor.domain.model import Role
from governor.services.security import tokens
from governor.settings import load_settings
from tests.integration.conftest import BY, Governor

OPERATOR = "gov_op_report_sessions"


@pytest.fixture
def browser(gov: Governor, migrated_url: str) -> Iterator[TestClient]:
    """The governor in-process, as a browser would reach it: no bearer token of its own."""
    with gov.session() as session:
        tokens.bootstrap_operator(session, OPERATOR, gov.clock.now())
    settings = load_settings(database_url=migrated_url, scheduler_enabled=False)
    with TestClient(create_app(settings, gov.ctx)) as client:
        yield client


def test_the_report_linked_from_a_budget_card_opens_with_the_dashboards_session(
    gov: Governor, browser: TestClient
) -> None:
    budget = gov.budget(ceiling="100")
    gov.pod(budget, ref="h100-sft")
    gov.tick(60)
    html = f"/v1/budgets/{budget}/report?format=html"
    md = f"/v1/budgets/{budget}/report?format=md"
    assert browser.get(html).status_code == 401  # not signed in: refused as before

    signed_in = browser.post("/login", data={"token": OPERATOR}, follow_redirects=False)
    assert signed_in.status_code == 303
    card = browser.get("/status").text
    assert f'<a href="{html}">HTML</a>' in card and f'<a href="{md}">Markdown</a>' in card

    page = browser.get(html)
    assert page.status_code == 200, page.text[:300]
    assert page.headers["content-type"].startswith("text/html")
    assert "<h3>Stops" in page.text and "h100-sft" in page.text
    markdown = browser.get(md)
    assert markdown.status_code == 200 and markdown.text.startswith("# Run report: pilot")
    # only the report opens so: the rest of the API still wants a bearer token
    assert browser.get(f"/v1/budgets/{budget}").status_code == 401

    cookie = browser.cookies["governor_session"]
    browser.cookies.clear()
    assert browser.get(html).status_code == 401
    forged = cookie[:-1] + ("0" if cookie[-1] != "0" else "1")
    browser.cookies.set("governor_session", forged)
    assert browser.get(html).status_code == 401
    browser.cookies.set("governor_session", cookie)
    assert browser.get(html).status_code == 200  # the genuine one still opens it


def test_a_session_whose_token_was_revoked_no_longer_opens_the_report(
    gov: Governor, browser: TestClient
) -> None:
    budget = gov.budget(ceiling="100")
    with gov.session() as s:
        viewer = tokens.issue(s, Role.VIEWER, gov.clock.now(), label="wallboard")
        viewer_id = tokens.authenticate(s, viewer, gov.clock.now()).token_id
    assert viewer_id is not None
    assert browser.post("/login", data={"token": viewer}).status_code == 200
    report = f"/v1/budgets/{budget}/report?format=html"
    assert browser.get(report).status_code == 200
    with gov.session() as s:
        tokens.revoke(s, viewer_id, gov.clock.now(), by=BY)
    assert browser.get(report).status_code == 401
