"""`governor budget declare|list|show|close|adopt-labelled-pods`: the request each sends, and
what it prints."""

from __future__ import annotations

import json

import pytest

from tests.unit.cli.scripted import (
    BUDGET_ID,
    TOKEN,
    URL,
    Governor,
    body,
    budget_out,
    page,
)

SHOWN = f"""\
id                   {BUDGET_ID}
name                 pilot
team                 team_default
state                open
requires a plan      no
labelled pods        not adopted
ceiling              $1,000.00
approved extensions  $50.00
effective ceiling    $1,050.00
spent                $412.50
+ shutdown           $12.00
+ storage tail       $5.50
+ reserve            $25.00
= committed          $430.00 (stops at the effective ceiling)
remaining            $620.00
held for plans       $100.00 (not committed)
launch reservations  $0.00 (not committed)
burn rate            $3.60/h
exhausted at         2026-05-01T12:00:00+00:00
closed at            -
note                 the pilot
"""


def test_declare_posts_what_was_given_and_shows_the_budget(governor: Governor) -> None:
    governor.answer("POST", "/v1/budgets", budget_out(), status=201)
    ran = governor.run(
        "budget", "declare", "pilot", "--ceiling", "1000", "--reserve", "25",
        "--storage-tail-hours", "48", "--thresholds", "50,80,90", "--note", "the pilot",
        "--require-plan",
    )  # fmt: skip
    assert (ran.code, ran.out, ran.err) == (0, SHOWN, "")
    assert ran.sent == [("POST", "/v1/budgets")]
    assert body(ran.last) == {
        "name": "pilot",
        "ceiling_usd": "1000",
        "reserve_usd": "25",
        "storage_tail_hours": 48.0,
        "alert_thresholds": [50, 80, 90],
        "note": "the pilot",
        "require_plan": True,
    }
    assert ran.last.headers["authorization"] == f"Bearer {TOKEN}"
    assert ran.last.headers["content-type"] == "application/json"
    assert str(ran.last.url).startswith(URL)


def test_declare_leaves_what_was_not_given_to_the_server(governor: Governor) -> None:
    governor.answer("POST", "/v1/budgets", budget_out(), status=201)
    ran = governor.run("budget", "declare", "pilot", "--ceiling", "1000")
    assert body(ran.last) == {"name": "pilot", "ceiling_usd": "1000"}


def test_declare_names_the_team_the_budget_belongs_to(governor: Governor) -> None:
    governor.answer("POST", "/v1/budgets", budget_out(team_id="team_0000000000000001"), status=201)
    ran = governor.run("budget", "declare", "pilot", "--ceiling", "1000", "--team", "vision")
    assert body(ran.last) == {"name": "pilot", "ceiling_usd": "1000", "team": "vision"}
    assert "team                 team_0000000000000001" in ran.out


def test_declare_can_say_no_plan_is_needed_whatever_the_servers_default(
    governor: Governor,
) -> None:
    governor.answer("POST", "/v1/budgets", budget_out(), status=201)
    ran = governor.run("budget", "declare", "pilot", "--ceiling", "1000", "--no-require-plan")
    assert body(ran.last) == {"name": "pilot", "ceiling_usd": "1000", "require_plan": False}
    assert "requires a plan      no" in ran.out


def test_declare_refuses_thresholds_that_are_not_percentages(
    governor: Governor, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        governor.run("budget", "declare", "pilot", "--ceiling", "1", "--thresholds", "50,lots")
    assert exit_.value.code == 2
    assert "a comma-separated list of percentages" in capsys.readouterr().err


def test_list_is_a_table_with_money_right_aligned(governor: Governor) -> None:
    side = budget_out(
        id="bud_00000000000000a2",
        name="side",
        effective_ceiling_usd="25000.00",
        spent_usd="0",
        shutdown_usd="0",
        storage_tail_usd="0",
        reserve_usd="0",
        committed_usd="0",
        held_for_plans_usd="0",
        remaining_usd="25000.00",
        burn_rate_usd_per_hour="0",
    )
    governor.answer("GET", "/v1/budgets", page(budget_out(), side))
    ran = governor.run("budget", "list")
    assert ran.sent == [("GET", "/v1/budgets?limit=100")]
    assert ran.code == 0
    assert ran.out.splitlines() == [
        "id                    name   state     ceiling    spent  +shutdown  +tail  +reserve  "
        "=committed   remaining     burn  held-for-plans",
        f"{BUDGET_ID}  pilot  open    $1,050.00  $412.50     $12.00  $5.50    $25.00  "
        "   $430.00     $620.00  $3.60/h         $100.00",
        "bud_00000000000000a2  side   open   $25,000.00    $0.00      $0.00  $0.00     $0.00  "
        "     $0.00  $25,000.00  $0.00/h           $0.00",
    ]


def test_a_name_that_hides_characters_is_printed_with_their_escapes(governor: Governor) -> None:
    """A name the server stored as it was written to its database by other hands: the table
    shows what is there, its columns still aligned."""
    governor.answer("GET", "/v1/budgets", page(budget_out(name="ops\u202egpj\x1b[2J")))
    ran = governor.run("budget", "list")
    assert ran.code == 0
    assert "\u202e" not in ran.out and "\x1b" not in ran.out
    header, row = ran.out.splitlines()
    assert row.startswith(f"{BUDGET_ID}  ops\\u202egpj\\u001b[2J  open")
    assert header.index("state") == row.index("open")


def test_list_pages_on_with_the_cursor_it_was_given(governor: Governor) -> None:
    governor.answer("GET", "/v1/budgets", page(budget_out(), next_cursor="c2"))
    ran = governor.run("budget", "list", "--limit", "1", "--cursor", "c1")
    assert ran.sent == [("GET", "/v1/budgets?limit=1&cursor=c1")]
    assert ran.out.endswith("\n\n1 shown; there are more: run the same command with --cursor c2\n")


def test_list_of_none_says_so(governor: Governor) -> None:
    governor.answer("GET", "/v1/budgets", page())
    assert governor.run("budget", "list").out == "(none)\n"


def test_show_looks_a_name_up_first(governor: Governor) -> None:
    governor.has("/v1/budgets", budget_out())
    governor.answer("GET", f"/v1/budgets/{BUDGET_ID}", budget_out())
    ran = governor.run("budget", "show", "pilot")
    assert ran.sent == [
        ("GET", "/v1/budgets?name=pilot&limit=1000"),
        ("GET", f"/v1/budgets/{BUDGET_ID}"),
    ]
    assert (ran.code, ran.out) == (0, SHOWN)


def test_show_takes_an_id_as_it_is(governor: Governor) -> None:
    governor.answer("GET", f"/v1/budgets/{BUDGET_ID}", budget_out())
    ran = governor.run("budget", "show", BUDGET_ID)
    assert ran.sent == [("GET", f"/v1/budgets/{BUDGET_ID}")]


def test_show_prints_the_servers_json_with_json(governor: Governor) -> None:
    governor.answer("GET", f"/v1/budgets/{BUDGET_ID}", budget_out())
    ran = governor.run("budget", "show", BUDGET_ID, "--json")
    assert ran.out == json.dumps(budget_out(), indent=2) + "\n"


def test_close_posts_the_reason_and_whether_storage_is_gone(governor: Governor) -> None:
    closed = budget_out(state="closed", closed_at="2026-04-02T09:00:00+00:00")
    governor.answer("POST", f"/v1/budgets/{BUDGET_ID}/close", closed)
    ran = governor.run("budget", "close", BUDGET_ID, "--reason", "done", "--storage-deleted")
    assert ran.sent == [("POST", f"/v1/budgets/{BUDGET_ID}/close")]
    assert body(ran.last) == {"reason": "done", "storage_deleted": True}
    assert "state                closed\n" in ran.out
    assert "closed at            2026-04-02T09:00:00+00:00\n" in ran.out
    assert body(governor.run("budget", "close", BUDGET_ID).last) == {}


def test_declare_can_let_the_budgets_label_alone_register_pods(governor: Governor) -> None:
    governor.answer("POST", "/v1/budgets", budget_out(adopt_labelled_pods=True), status=201)
    ran = governor.run("budget", "declare", "pilot", "--ceiling", "1000", "--adopt-labelled-pods")
    assert body(ran.last) == {"name": "pilot", "ceiling_usd": "1000", "adopt_labelled_pods": True}
    assert "labelled pods        adopted\n" in ran.out


def test_adopt_labelled_pods_posts_the_choice_and_the_reason(governor: Governor) -> None:
    path = f"/v1/budgets/{BUDGET_ID}/adoption"
    governor.answer("POST", path, budget_out(adopt_labelled_pods=True))
    ran = governor.run(
        "budget", "adopt-labelled-pods", BUDGET_ID, "--adopt", "--reason", "our launcher"
    )
    assert ran.sent == [("POST", path)]
    assert body(ran.last) == {"adopt_labelled_pods": True, "reason": "our launcher"}
    assert "labelled pods        adopted\n" in ran.out
    ran = governor.run("budget", "adopt-labelled-pods", BUDGET_ID, "--no-adopt", "--reason", "x")
    assert body(ran.last) == {"adopt_labelled_pods": False, "reason": "x"}
