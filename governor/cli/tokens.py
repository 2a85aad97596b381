"""`governor token`: create, list and revoke tokens over HTTP; and `rotate-bootstrap`, which
works on the database directly."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from governor.cli.http import Api, given
from governor.cli.names import POD, resolve
from governor.cli.output import fields, paged, refused, table
from governor.cli.verbs import Commands, Shown, group, page, paging, verb
from governor.settings import load_settings

TOKEN_HEADERS = ("id", "role", "label", "for", "teams", "created", "expires", "state")


def _teams(t: dict[str, Any]) -> str | None:
    """The teams an operator's, approver's or viewer's token is for (`all`: org-wide); None
    for a job's or agent's, bound to its run or pod instead."""
    if t["role"] not in ("operator", "approver", "viewer"):
        return None
    return ",".join(t["teams"]) if t.get("teams") else "all"


def _token_row(t: dict[str, Any]) -> tuple[object, ...]:
    bound = t["run_id"] or t["pod_id"] or t["node"] or ("bootstrap" if t["bootstrap"] else "")
    expired = t["expires_at"] and datetime.fromisoformat(t["expires_at"]) <= datetime.now(UTC)
    state = "revoked" if t["revoked_at"] else "expired" if expired else "active"
    return (
        t["id"],
        t["role"],
        t["label"],
        bound,
        _teams(t),
        t["created_at"],
        t["expires_at"],
        state,
    )


def show_tokens(tokens: list[dict[str, Any]]) -> str:
    return table(TOKEN_HEADERS, (_token_row(t) for t in tokens))


def show_tokens_one(t: dict[str, Any]) -> str:
    return show_tokens([t])


def show_token(t: dict[str, Any]) -> str:
    bound = [("pod", t["pod_id"])] if t["pod_id"] else [("node", t["node"])] if t["node"] else []
    expires = ("expires", t["expires_at"] or "never")
    teams = [] if _teams(t) is None else [("teams", _teams(t))]
    text = fields(
        [("id", t["id"]), ("role", t["role"]), *bound, *teams, ("label", t["label"]), expires]
    )
    return f"{text}\n\nThe token (shown once; store it now):\n  {t['token']}"


def token_create(api: Api, a: argparse.Namespace) -> Shown:
    pod_id = None if a.pod is None else resolve(api, POD, a.pod)
    teams = None if a.teams is None else [t.strip() for t in a.teams.split(",") if t.strip()]
    body = given(
        role=a.role,
        label=a.label,
        pod_id=pod_id,
        node=a.node,
        expires_at=a.expires_at,
        teams=teams,
    )
    return api.call("POST", "/v1/tokens", body=body), show_token


def token_list(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("GET", "/v1/tokens", params=page(a)), paged(show_tokens)


def token_revoke(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("POST", f"/v1/tokens/{a.token_id}/revoke"), show_tokens_one


def _rotate_bootstrap(_args: argparse.Namespace) -> int:
    from governor.bootstrap import build_context, close_context
    from governor.db.engine import unit_of_work
    from governor.services.security import tokens

    settings = load_settings()
    if settings.operator_token is None:
        return refused("set GOVERNOR_OPERATOR_TOKEN to the new token first")
    ctx = build_context(settings)
    try:
        with unit_of_work(ctx.sessions) as session:
            revoked = tokens.rotate_bootstrap(
                session, settings.operator_token.get_secret_value(), ctx.clock.now()
            )
    finally:
        close_context(ctx)
    print(f"The bootstrap operator token is the configured one; {revoked} earlier one(s) revoked.")
    return 0


def add_commands(commands: Commands) -> None:
    tokens = group(commands, "token", "create, list and revoke tokens")
    token = verb(tokens, "create", "create a token; prints it once", token_create)
    token.add_argument(
        "--role", required=True, choices=["operator", "approver", "viewer", "agent", "gate"]
    )
    token.add_argument(
        "--teams",
        metavar="TEAM,...",
        help="an operator's, approver's or viewer's token for these teams only (names or ids); "
        "default: every team (a team's operator: its own teams)",
    )
    whom = token.add_mutually_exclusive_group()
    whom.add_argument("--pod", metavar="POD", help="an agent token for this pod (name or id)")
    whom.add_argument("--node", help="a node agent's token for this machine")
    token.add_argument("--label", help="who or what it is for (recorded)")
    token.add_argument(
        "--expires-at", metavar="TIME", help="ISO 8601 time it stops working (default: never)"
    )
    paging(
        verb(tokens, "list", "tokens: whom each is for, whether it still works", token_list),
        "newest first",
    )
    revoking = verb(tokens, "revoke", "end a token now", token_revoke)
    revoking.add_argument("token_id")
    rotate = tokens.add_parser(
        "rotate-bootstrap",
        help="make GOVERNOR_OPERATOR_TOKEN the only bootstrap operator token, revoking earlier "
        "ones (run once every replica has the new value; works on the database directly)",
    )
    rotate.set_defaults(handler=_rotate_bootstrap)
