"""`governor ext`: request, list, approve and deny budget extensions."""

from __future__ import annotations

import argparse
from typing import Any

from governor.cli.http import Api, given
from governor.cli.names import BUDGET, budget_filter, names, path_of
from governor.cli.output import paged, table, usd
from governor.cli.verbs import Commands, Shown, budget_arg, budget_option, group, page, paging, verb

EXTENSION_HEADERS = ("id", "budget", "amount", "state", "by", "reason", "decided", "note")


def show_extensions(exts: list[dict[str, Any]], budgets: dict[str, str]) -> str:
    rows = [
        (
            e["id"],
            budgets.get(e["budget_id"], e["budget_id"]),
            usd(e["amount_usd"]),
            e["state"],
            e["requested_by"],
            e["reason"],
            e["decided_at"],
            e["decision_note"],
        )
        for e in exts
    ]
    return table(EXTENSION_HEADERS, rows, right=(2,))


def ext_list(api: Api, a: argparse.Namespace) -> Shown:
    params = {"budget_id": budget_filter(api, a.budget), "state": a.state, **page(a)}
    exts = api.call("GET", "/v1/extensions", params=params)
    budgets = names(api, BUDGET)
    return exts, paged(lambda e: show_extensions(e, budgets))


def ext_request(api: Api, a: argparse.Namespace) -> Shown:
    body = {"amount_usd": a.amount, "reason": a.reason}
    path = path_of(api, BUDGET, a.budget, "extensions")
    return _one_extension(api, api.call("POST", path, body=body))


def ext_decide(api: Api, a: argparse.Namespace) -> Shown:
    body = given(note=a.note)
    path = f"/v1/extensions/{a.extension_id}/{a.decision}"
    return _one_extension(api, api.call("POST", path, body=body))


def _one_extension(api: Api, extension: dict[str, Any]) -> Shown:
    budgets = names(api, BUDGET)
    return extension, lambda e: show_extensions([e], budgets)


def add_commands(commands: Commands) -> None:
    exts = group(commands, "ext", "request, list, approve and deny budget extensions (over HTTP)")
    asking = verb(
        exts,
        "request",
        "ask for more budget; it changes nothing until an operator approves it",
        ext_request,
    )
    budget_arg(asking)
    asking.add_argument("--amount", required=True, metavar="USD", help="how much more")
    asking.add_argument("--reason", required=True, help="what it is for (recorded)")
    listing = verb(exts, "list", "extension requests", ext_list)
    budget_option(listing)
    listing.add_argument("--state", help="pending, approved, denied or expired")
    paging(listing, "oldest first")
    for decision in ("approve", "deny"):
        decide = verb(exts, decision, f"{decision} a pending extension (once)", ext_decide)
        decide.add_argument("extension_id")
        decide.add_argument("--note", help="recorded with the decision")
        decide.set_defaults(decision=decision)
