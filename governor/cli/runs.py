"""`governor run`: create, list, show and acknowledge runs."""

from __future__ import annotations

import argparse
from typing import Any

from governor.cli.http import Api, given
from governor.cli.names import BUDGET, POD, RUN, budget_filter, names, path_of, resolve
from governor.cli.output import fields, paged, table
from governor.cli.verbs import Commands, Shown, budget_arg, budget_option, group, page, paging, verb
from governor.domain.model import RunStatus

RUN_HEADERS = ("id", "name", "budget", "pod", "status", "phase", "step", "last heartbeat")
RUN_STATES = tuple(s.value for s in RunStatus)


def _steps(r: dict[str, Any]) -> str:
    return f"{r['step']:,}" + ("" if r["total_steps"] is None else f" / {r['total_steps']:,}")


def show_run(r: dict[str, Any]) -> str:
    directive = r["directive"]
    checkpoint = r["checkpoint"]
    text = fields(
        [
            ("id", r["id"]),
            ("name", r["name"]),
            ("budget", r["budget_id"]),
            ("pod", r["pod_id"]),
            ("status", r["status"]),
            ("attempt", r["attempt"]),
            ("phase", r["phase"]),
            ("step", _steps(r)),
            ("last heartbeat", r["last_heartbeat_at"]),
            (
                "checkpoint",
                f"step {checkpoint['step']:,}, {checkpoint['path']}" if checkpoint else None,
            ),
            ("directive", " ".join(filter(None, (directive["action"], directive["reason"])))),
            ("heartbeat timeout", f"{r['heartbeat_timeout_s']:g} s"),
            ("checkpoint grace", f"{r['checkpoint_grace_s']:g} s"),
            ("ended at", r["ended_at"]),
            (
                "acknowledged",
                f"{r['acknowledged_at']} by {r['acknowledged_by']}"
                if r["acknowledged_at"]
                else None,
            ),
        ]
    )
    if "token" not in r:
        return text
    return f"{text}\n\nThe job's token (shown once; give it to the job):\n  {r['token']}"


def show_runs(runs: list[dict[str, Any]], budgets: dict[str, str], pods: dict[str, str]) -> str:
    rows = [
        (
            r["id"],
            r["name"],
            budgets.get(r["budget_id"], r["budget_id"]),
            pods.get(r["pod_id"], r["pod_id"]),
            r["status"],
            r["phase"],
            _steps(r),
            r["last_heartbeat_at"],
        )
        for r in runs
    ]
    return table(RUN_HEADERS, rows, right=(6,))


def run_create(api: Api, a: argparse.Namespace) -> Shown:
    budget_id = resolve(api, BUDGET, a.budget)
    body = given(
        name=a.name,
        pod_id=resolve(api, POD, a.pod, budget_id),
        total_steps=a.total_steps,
        heartbeat_timeout_s=a.heartbeat_timeout_s,
        checkpoint_grace_s=a.checkpoint_grace_s,
    )
    return api.call("POST", f"{BUDGET.path}/{budget_id}/runs", body=body), show_run


def run_list(api: Api, a: argparse.Namespace) -> Shown:
    budget_id = budget_filter(api, a.budget)
    params = {"budget_id": budget_id, "status": a.state, **page(a)}
    runs = api.call("GET", "/v1/runs", params=params)
    budgets, pods = names(api, BUDGET), names(api, POD, budget_id=budget_id)
    return runs, paged(lambda r: show_runs(r, budgets, pods))


def run_show(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("GET", path_of(api, RUN, a.run)), show_run


def run_acknowledge(api: Api, a: argparse.Namespace) -> Shown:
    body = given(reason=a.reason)
    return api.call("POST", path_of(api, RUN, a.run, "acknowledge"), body=body), show_run


def add_commands(commands: Commands) -> None:
    runs = group(commands, "run", "create, list, show and acknowledge runs (over HTTP)")
    create = verb(runs, "create", "create a run; prints its job token once", run_create)
    budget_arg(create)
    create.add_argument(
        "--pod", required=True, metavar="POD", help="the pod it runs on (name or id)"
    )
    create.add_argument("--name", required=True)
    create.add_argument("--total-steps", type=int)
    create.add_argument("--heartbeat-timeout-s", type=float)
    create.add_argument("--checkpoint-grace-s", type=float)
    listing = verb(runs, "list", "runs with their status, phase and step", run_list)
    budget_option(listing)
    listing.add_argument(
        "--state",
        choices=RUN_STATES,
        metavar="STATE",
        help=f"only runs in this state: {', '.join(RUN_STATES)}",
    )
    paging(listing, "oldest first")
    shown = verb(runs, "show", "a run with its step, checkpoint and directive", run_show)
    shown.add_argument("run", metavar="RUN", help="the run's name or id")
    seen = verb(
        runs,
        "acknowledge",
        "acknowledge a lost run (its job went silent, its pod stopped): it leaves the "
        "dashboard's 'Needs you first'",
        run_acknowledge,
    )
    seen.add_argument("run", metavar="RUN", help="the run's name or id")
    seen.add_argument("--reason", help="what was done about it (recorded)")
