"""`governor team`: make, list and show teams, declare a team's ceiling per period, ask for and
decide its extensions, and read its report for a period. A team is named by its id or name."""

from __future__ import annotations

import argparse
import re
from typing import Any

from governor.cli.http import Api, OperatorError, given
from governor.cli.output import fields, paged, per_hour, table, usd
from governor.cli.verbs import Commands, Shown, group, page, paging, verb

TEAMS = "/v1/teams"
TEAM_HEADERS = (
    "id",
    "name",
    "time-zone",
    "period",
    "ceiling",
    "spent",
    "committed",
    "left",
    "forecast",
    "held",
)
EXTENSION_HEADERS = ("id", "amount", "state", "by", "reason", "decided by", "note")
REPORT_HEADERS = ("budget", "name", "spent")


def _every(t: dict[str, Any]) -> str:
    """How the team's periods run: `month`, `30 days`, or `-` without a ceiling."""
    if t["period_kind"] is None:
        return "-"
    return "month" if t["period_kind"] == "month" else f"{t['period_days']} days"


def _team_row(t: dict[str, Any]) -> tuple[object, ...]:
    p = t["period"] or {}
    return (
        t["id"],
        t["name"],
        t["time_zone"],
        _every(t),
        usd(p.get("ceiling_usd")),
        usd(p.get("spent_usd")),
        usd(p.get("committed_usd")),
        usd(p.get("left_usd")),
        usd(p.get("forecast_usd")),
        ("yes" if p["held"] else "no") if p else "-",
    )


def show_teams(teams: list[dict[str, Any]]) -> str:
    return table(TEAM_HEADERS, (_team_row(t) for t in teams), right=range(4, 9))


def show_team(t: dict[str, Any]) -> str:
    head = [
        ("id", t["id"]),
        ("name", t["name"]),
        ("time zone", t["time_zone"]),
        ("org approval over", usd(t["org_approval_over_usd"])),
    ]
    p = t["period"]
    if p is None:
        return fields([*head, ("ceiling", "none (declare one: governor team ceiling)")])
    held = "yes: no new pod, run or resume until the period ends" if p["held"] else "no"
    return fields(
        [
            *head,
            ("ceiling", f"{usd(t['ceiling_usd'])} every {_every(t)}"),
            ("declared at", t["ceiling_declared_at"]),
            ("period", f"{p['start']} to {p['end']}"),
            ("ceiling this period", f"{usd(p['ceiling_usd'])} (with approved extensions)"),
            ("spent", usd(p["spent_usd"])),
            ("+ shutdown", usd(p["shutdown_usd"])),
            ("= committed", f"{usd(p['committed_usd'])} (stops at the ceiling)"),
            ("remaining", usd(p["remaining_usd"])),
            ("left", f"{usd(p['left_usd'])} (the most a budget may be declared with)"),
            ("burn rate", per_hour(p["burn_rate_usd_per_hour"])),
            ("forecast", f"{usd(p['forecast_usd'])} (at the period's end, at this burn)"),
            ("held", held),
        ]
    )


def show_extensions(exts: list[dict[str, Any]]) -> str:
    rows = [
        (
            e["id"],
            usd(e["amount_usd"]),
            e["state"],
            e["requested_by"],
            e["reason"],
            e["decided_by"],
            e["decision_note"],
        )
        for e in exts
    ]
    return table(EXTENSION_HEADERS, rows, right=(1,))


def show_report(r: dict[str, Any]) -> str:
    t = r["team"]
    current = " (current: to now)" if r["current"] else ""
    summary = fields(
        [
            ("team", f"{t['name']} ({t['id']})"),
            ("period", f"{r['period_start']} to {r['period_end']}{current}"),
            ("ceiling", usd(r["ceiling_usd"]) if r["ceiling_usd"] else "none"),
            ("spent", usd(r["spent_usd"])),
        ]
    )
    budgets = table(
        REPORT_HEADERS,
        ((b["budget_id"], b["name"], usd(b["spent_usd"])) for b in r["budgets"]),
        right=(2,),
    )
    extensions = show_extensions(list(r["extensions"]))
    return f"{summary}\n\nBudgets, most spent first:\n{budgets}\n\nExtensions:\n{extensions}"


def team_path(api: Api, given_name: str, *below: str) -> str:
    """The API path of the team named by its id or its name (or of what is `below` it)."""
    teams = api.items(TEAMS)
    found = [t for t in teams if given_name in (t["id"], t["name"])]
    if not found:
        raise OperatorError(f"no team named {given_name!r}; 'governor team list' shows them")
    return "/".join((TEAMS, str(found[0]["id"]), *below))


def team_create(api: Api, a: argparse.Namespace) -> Shown:
    body = given(
        name=a.name, time_zone=a.time_zone, org_approval_over_usd=a.org_approval_over, note=a.note
    )
    return api.call("POST", TEAMS, body=body), show_team


def team_list(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("GET", TEAMS, params=page(a)), paged(show_teams)


def team_show(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("GET", team_path(api, a.team)), show_team


def team_ceiling(api: Api, a: argparse.Namespace) -> Shown:
    kind, days = a.period
    body = given(ceiling_usd=a.usd, period=kind, period_days=days, reason=a.reason)
    return api.call("POST", team_path(api, a.team, "ceiling"), body=body), show_team


def team_extend(api: Api, a: argparse.Namespace) -> Shown:
    body = {"amount_usd": a.usd, "reason": a.reason}
    extension = api.call("POST", team_path(api, a.team, "extensions"), body=body)
    return extension, lambda e: show_extensions([e])


def team_decide(api: Api, a: argparse.Namespace) -> Shown:
    path = team_path(api, a.team, "extensions", a.extension_id, a.decision)
    extension = api.call("POST", path, body=given(note=a.note))
    return extension, lambda e: show_extensions([e])


def team_report(api: Api, a: argparse.Namespace) -> Shown:
    params = given(period=a.period)
    return api.call("GET", team_path(api, a.team, "report"), params=params), show_report


def _period(text: str) -> tuple[str, int | None]:
    """`month`, or `Nd` (every N days): the API's `period` and `period_days`."""
    if text == "month":
        return "month", None
    days = re.fullmatch(r"([0-9]{1,3})d", text)
    if days is None or not 1 <= int(days[1]) <= 366:
        raise argparse.ArgumentTypeError("'month', or a number of days from 1 to 366 as '30d'")
    return "days", int(days[1])


def _period_day(text: str) -> str:
    """A period named by a day in it (YYYY-MM-DD), or by its month (YYYY-MM: its first day)."""
    if re.fullmatch(r"[0-9]{4}-[0-9]{2}", text):
        return f"{text}-01"
    if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
        return text
    raise argparse.ArgumentTypeError("a month as YYYY-MM, or a day in the period as YYYY-MM-DD")


def _team_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("team", metavar="TEAM", help="the team's name or id")


def add_commands(commands: Commands) -> None:
    teams = group(
        commands,
        "team",
        "make and list teams, their ceilings per period, extensions and reports (over HTTP)",
    )
    create = verb(teams, "create", "make a team (an org-wide operator's)", team_create)
    create.add_argument("name", help="the team's name (unique)")
    create.add_argument(
        "--time-zone",
        metavar="ZONE",
        help="the IANA time zone its periods run in, e.g. Europe/Berlin (default UTC)",
    )
    create.add_argument(
        "--org-approval-over",
        metavar="USD",
        help="an extension of more than this needs an org-wide operator or approver",
    )
    create.add_argument("--note", help="what the team is")
    paging(verb(teams, "list", "teams with their money this period", team_list), "oldest first")
    _team_arg(verb(teams, "show", "one team with its money this period", team_show))
    ceiling = verb(
        teams,
        "ceiling",
        "declare the team's ceiling per period, in writing, once (an org-wide operator's)",
        team_ceiling,
    )
    _team_arg(ceiling)
    ceiling.add_argument("--usd", required=True, metavar="USD", help="the ceiling per period")
    ceiling.add_argument(
        "--period",
        type=_period,
        default=("month", None),
        metavar="month|Nd",
        help="the calendar month (default), or every N days (e.g. 30d), in the team's zone",
    )
    ceiling.add_argument("--reason", required=True, help="why this ceiling (recorded)")
    extend = verb(
        teams,
        "extend",
        "ask to raise the team's ceiling this period; nothing changes until it is approved",
        team_extend,
    )
    _team_arg(extend)
    extend.add_argument("--usd", required=True, metavar="USD", help="how much more")
    extend.add_argument("--reason", required=True, help="what it is for (recorded)")
    for decision in ("approve", "deny"):
        decide = verb(
            teams,
            decision,
            f"{decision} a pending extension of a team's ceiling (once; an org-wide "
            "operator's or approver's)",
            team_decide,
        )
        _team_arg(decide)
        decide.add_argument("extension_id", metavar="EXTENSION")
        decide.add_argument("--note", help="recorded with the decision")
        decide.set_defaults(decision=decision)
    reporting = verb(teams, "report", "a team's spend by budget in a period", team_report)
    _team_arg(reporting)
    reporting.add_argument(
        "--period",
        type=_period_day,
        metavar="YYYY-MM",
        help="the period holding this month's first day (or YYYY-MM-DD: the period holding "
        "that day), in the team's time zone (default: the current period)",
    )
