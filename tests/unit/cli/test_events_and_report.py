"""`governor events` and `governor report`: the request each sends, and what it prints."""

from __future__ import annotations

import json

from tests.unit.cli.scripted import BUDGET_ID, RUN_ID, Governor, budget_out, event_out, page

REPORT = f"# Run report: pilot ({BUDGET_ID})\n\n## Stops\n\n- `manual`\n"


def test_events_asks_for_what_was_narrowed_and_shows_the_oldest_first(governor: Governor) -> None:
    governor.has("/v1/budgets", budget_out())
    of_a_run = {"subject": f"run:{RUN_ID}", "pod_name": "gpu-a", "run_name": "sft"}
    newest_first = page(
        event_out(3, severity="critical", **of_a_run), event_out(2), next_cursor="2"
    )
    governor.answer("GET", "/v1/events", newest_first)
    ran = governor.run(
        "events", "--budget", "pilot", "--severity", "warning", "--category", "budget",
        "--subject", f"budget:{BUDGET_ID}", "--since", "2026-04-01T00:00:00Z", "--limit", "2",
    )  # fmt: skip
    assert ran.sent == [
        ("GET", "/v1/budgets?name=pilot&limit=1000"),
        (
            "GET",
            f"/v1/events?budget_id={BUDGET_ID}&min_severity=warning&category=budget"
            f"&subject=budget%3A{BUDGET_ID}&since=2026-04-01T00%3A00%3A00Z&limit=2",
        ),
    ]
    assert ran.code == 0
    assert ran.out.splitlines() == [
        "id  at                         severity  category  subject                      pod    "
        "run  message",
        f"2   2026-04-01T10:02:00+00:00  info      budget    budget:{BUDGET_ID}  -      "
        "-    event 2",
        f"3   2026-04-01T10:03:00+00:00  critical  budget    run:{RUN_ID}     gpu-a  sft  event 3",
        "",
        "2 shown; there are more: run the same command with --cursor 2",
    ]


def test_events_unnarrowed_asks_for_the_latest_page(governor: Governor) -> None:
    governor.answer("GET", "/v1/events", page())
    ran = governor.run("events", "--cursor", "7")
    assert ran.sent == [("GET", "/v1/events?limit=100&cursor=7")]
    assert ran.out == "(none)\n"


def test_report_prints_the_servers_markdown_as_it_is(governor: Governor) -> None:
    governor.has("/v1/budgets", budget_out())
    governor.answer("GET", f"/v1/budgets/{BUDGET_ID}/report", REPORT)
    ran = governor.run("report", "pilot")
    assert ran.sent == [
        ("GET", "/v1/budgets?name=pilot&limit=1000"),
        ("GET", f"/v1/budgets/{BUDGET_ID}/report?format=md"),
    ]
    assert (ran.code, ran.out, ran.err) == (0, REPORT, "")


def test_report_as_json(governor: Governor) -> None:
    report = {"budget": {"id": BUDGET_ID}, "stops": [{"reason": "manual"}]}
    governor.answer("GET", f"/v1/budgets/{BUDGET_ID}/report", report)
    ran = governor.run("report", BUDGET_ID, "--json")
    assert ran.sent == [("GET", f"/v1/budgets/{BUDGET_ID}/report?format=json")]
    assert json.loads(ran.out) == report
