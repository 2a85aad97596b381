"""`governor budget`: declare, list, show and close budgets, and say whether a label alone
registers a pod under one."""

from __future__ import annotations

import argparse
from typing import Any

from governor.cli.http import Api, given
from governor.cli.names import BUDGET, path_of
from governor.cli.output import fields, paged, per_hour, table, usd
from governor.cli.verbs import Commands, Shown, budget_arg, group, page, paging, verb

BUDGET_HEADERS = (
    "id",
    "name",
    "state",
    "ceiling",
    "spent",
    "+shutdown",
    "+tail",
    "+reserve",
    "=committed",
    "remaining",
    "burn",
    "held-for-plans",
)
PARTS = (  # committed spend is the sum of these parts
    ("spent", "spent_usd"),
    ("+ shutdown", "shutdown_usd"),
    ("+ storage tail", "storage_tail_usd"),
    ("+ reserve", "reserve_usd"),
)


def _budget_row(b: dict[str, Any]) -> tuple[object, ...]:
    return (
        b["id"],
        b["name"],
        b["state"],
        usd(b["effective_ceiling_usd"]),
        *(usd(b[key]) for _, key in PARTS),
        usd(b["committed_usd"]),
        usd(b["remaining_usd"]),
        per_hour(b["burn_rate_usd_per_hour"]),
        usd(b["held_for_plans_usd"]),
    )


def show_budgets(budgets: list[dict[str, Any]]) -> str:
    return table(BUDGET_HEADERS, (_budget_row(b) for b in budgets), right=range(3, 12))


def show_budget(b: dict[str, Any]) -> str:
    return fields(
        [
            ("id", b["id"]),
            ("name", b["name"]),
            ("team", b["team_id"]),
            ("state", b["state"]),
            ("requires a plan", "yes" if b["require_plan"] else "no"),
            ("labelled pods", "adopted" if b["adopt_labelled_pods"] else "not adopted"),
            ("ceiling", usd(b["ceiling_usd"])),
            ("approved extensions", usd(b["approved_extensions_usd"])),
            ("effective ceiling", usd(b["effective_ceiling_usd"])),
            *((name, usd(b[key])) for name, key in PARTS),
            ("= committed", f"{usd(b['committed_usd'])} (stops at the effective ceiling)"),
            ("remaining", usd(b["remaining_usd"])),
            ("held for plans", f"{usd(b['held_for_plans_usd'])} (not committed)"),
            ("launch reservations", f"{usd(b['reserved_for_launches_usd'])} (not committed)"),
            ("burn rate", per_hour(b["burn_rate_usd_per_hour"])),
            ("exhausted at", b["projected_exhaustion_at"]),
            ("closed at", b["closed_at"]),
            ("note", b["note"]),
        ]
    )


def budget_declare(api: Api, a: argparse.Namespace) -> Shown:
    body = given(
        name=a.name,
        ceiling_usd=a.ceiling,
        reserve_usd=a.reserve,
        storage_tail_hours=a.storage_tail_hours,
        alert_thresholds=a.thresholds,
        note=a.note,
        require_plan=a.require_plan,
        adopt_labelled_pods=a.adopt_labelled_pods or None,
        team=a.team,
    )
    return api.call("POST", "/v1/budgets", body=body), show_budget


def budget_list(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("GET", "/v1/budgets", params=page(a)), paged(show_budgets)


def budget_show(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("GET", path_of(api, BUDGET, a.budget)), show_budget


def budget_adopt(api: Api, a: argparse.Namespace) -> Shown:
    body = {"adopt_labelled_pods": a.adopt, "reason": a.reason}
    return api.call("POST", path_of(api, BUDGET, a.budget, "adoption"), body=body), show_budget


def budget_close(api: Api, a: argparse.Namespace) -> Shown:
    body = given(reason=a.reason, storage_deleted=a.storage_deleted or None)
    return api.call("POST", path_of(api, BUDGET, a.budget, "close"), body=body), show_budget


def _thresholds(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("a comma-separated list of percentages") from None


def add_commands(commands: Commands) -> None:
    budgets = group(commands, "budget", "declare, list, show and close budgets (over HTTP)")
    declare = verb(budgets, "declare", "declare a budget and its hard ceiling", budget_declare)
    declare.add_argument("name", help="the budget's name (unique among budgets not closed)")
    declare.add_argument("--ceiling", required=True, metavar="USD", help="the hard ceiling")
    declare.add_argument("--reserve", metavar="USD", help="held back for post-stop work")
    declare.add_argument(
        "--storage-tail-hours", type=float, metavar="H", help="how long stopped volumes are kept"
    )
    declare.add_argument(
        "--thresholds", type=_thresholds, metavar="PCTS", help="alert thresholds, e.g. 50,80,90"
    )
    declare.add_argument("--note", help="what the budget covers")
    declare.add_argument(
        "--team",
        help="the team it belongs to, by name or id (default: the default team); its ceiling "
        "must fit in what the team has left this period",
    )
    declare.add_argument(
        "--require-plan",
        action=argparse.BooleanOptionalAction,
        help="no pod without a checked plan ('governor plan submit', then 'pod add --plan'); "
        "default: the server's GOVERNOR_REQUIRE_PLAN",
    )
    declare.add_argument(
        "--adopt-labelled-pods",
        action="store_true",
        help="the account sweep registers a pod under it by its governor-budget label alone "
        "(default: only as one of its launches waiting for a pod)",
    )
    paging(verb(budgets, "list", "budgets with their figures", budget_list), "oldest first")
    budget_arg(verb(budgets, "show", "one budget with its figures", budget_show))
    adopting = verb(
        budgets,
        "adopt-labelled-pods",
        "whether a pod's governor-budget label alone registers it under the budget",
        budget_adopt,
    )
    budget_arg(adopting)
    adopting.add_argument(
        "--adopt",
        action=argparse.BooleanOptionalAction,
        required=True,
        help="--adopt: its label alone registers a pod; --no-adopt: only its launches' pods",
    )
    adopting.add_argument("--reason", required=True, help="why (recorded)")
    closing = verb(
        budgets, "close", "close a budget whose pods have stopped; its runs end", budget_close
    )
    budget_arg(closing)
    closing.add_argument("--reason", help="why (recorded)")
    closing.add_argument(
        "--storage-deleted",
        action="store_true",
        help="you have deleted its stopped pods' storage: they stop counting (nothing is "
        "deleted for you)",
    )
