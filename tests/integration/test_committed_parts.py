"""Committed spend shown with its parts wherever it is shown: the budget's API, the heartbeat's
budget block, the report (JSON, HTML, Markdown); each part as the formula names it, adding up
to committed spend exactly (SQLite and PostgreSQL)."""

from __future__ import annotations

from decimal import Decimal

from fastapi.testclient import TestClient

from governor.render import report_html
from governor.render.report_markdown import render
from governor.services.view import report
from tests.integration.conftest import Governor, ok

D = Decimal
# $3.60/h of compute and 100 GB of disk ($0.10/GB-month running, $0.20 stopped), 10 s in,
# 300 s of checkpoint grace, a $5 reserve and a month (730 h) of storage tail:
SPENT = D("0.010038")  # 10 s of compute ($0.01) and of storage
SHUTDOWN = D("0.351332")  # $3.6137/h over 300 s grace + 30 s stop latency + 4 x 5 s reaction
STORAGE_TAIL = D("20.000000")  # 100 GB x $0.20/GB-month for 730 h
RESERVE = D("5.000000")
COMMITTED = SPENT + SHUTDOWN + STORAGE_TAIL + RESERVE
PARTS = {
    "spent_usd": SPENT,
    "shutdown_usd": SHUTDOWN,
    "storage_tail_usd": STORAGE_TAIL,
    "reserve_usd": RESERVE,
}


def pilot(gov: Governor) -> tuple[str, str]:
    budget = gov.budget(ceiling="100", reserve="5", tail_hours=730)
    pod = gov.pod(budget, storage_gb=100, storage="0.10", stopped_storage="0.20")
    run = gov.run(budget, pod)  # 300 s of checkpoint grace
    gov.beat(run)
    gov.tick(10)  # an enforcement pass keeps the figures, parts and all
    return budget, run


def amounts(figures: dict[str, str]) -> dict[str, Decimal]:
    return {key: D(figures[key]) for key in PARTS}


def test_the_budget_api_gives_committed_spend_and_its_parts(
    gov: Governor, client: TestClient
) -> None:
    budget, _ = pilot(gov)
    got = ok(client.get(f"/v1/budgets/{budget}"))
    assert amounts(got) == PARTS
    assert D(got["committed_usd"]) == COMMITTED == sum(PARTS.values())
    assert D(got["remaining_usd"]) == D(100) - COMMITTED
    assert got["held_for_plans_usd"] == "0.00"  # no plan: nothing held, and never committed
    [listed] = ok(client.get("/v1/budgets"))["items"]
    assert {k: listed[k] for k in (*PARTS, "committed_usd")} == {
        k: got[k] for k in (*PARTS, "committed_usd")
    }


def test_the_heartbeat_answers_with_the_parts_the_latest_pass_kept(gov: Governor) -> None:
    _, run = pilot(gov)
    brief = gov.beat(run, step=2).budget  # a plain beat: the figures kept on the budget
    assert (brief.spent, brief.shutdown, brief.storage_tail, brief.reserve) == tuple(PARTS.values())
    assert brief.committed == COMMITTED
    assert brief.remaining == D(100) - COMMITTED
    assert brief.as_of == gov.clock.now()


def test_the_report_shows_the_parts_as_json_html_and_markdown(
    gov: Governor, client: TestClient
) -> None:
    budget, _ = pilot(gov)
    got = ok(client.get(f"/v1/budgets/{budget}/report"))["budget"]
    assert amounts(got) == PARTS and D(got["committed_usd"]) == COMMITTED
    with gov.session() as s:
        r = report.build(s, gov.ctx.config, budget, gov.clock.now())
    text = render(r)
    for line in (
        "| Spent | $0.01 |",
        "| + shutdown | $0.35 |",
        "| + storage tail | $20.00 |",
        "| + reserve | $5.00 |",
        "| = Committed (stops at the effective ceiling) | $25.36 |",
        "| Held for plans (not committed) | $0.00 |",
        "| Burn rate | $3.614/h |",  # a rate to the tenth of a cent
    ):
        assert line in text, line
    page = report_html.document(r)
    for field, shown in (
        ("shutdown", "$0.35"),
        ("storage-tail", "$20.00"),
        ("reserve", "$5.00"),
        ("committed", "$25.36"),
        ("held-for-plans", "$0.00"),
    ):
        assert f'data-field="{field}">{shown}<' in page, field
