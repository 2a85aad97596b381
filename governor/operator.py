"""Operator verbs over HTTP: `budget`, `pod`, `run`, `ext`, `events` and `report`.

Each verb is one API call made with the operator token (GOVERNOR_URL, GOVERNOR_TOKEN or
--url, --token). Output is a readable table by default and the server's JSON with --json.
Any failure exits 1 with one line that says what to do: the server is not reachable, the
token is missing or refused, or the server's own error message.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from governor.domain.money import dollars

DEFAULT_URL = "http://127.0.0.1:8000"
TIMEOUT_S = 30.0


class OperatorError(Exception):
    """A verb could not be carried out; the message says why, for a person."""


@dataclass(frozen=True)
class Api:
    url: str
    token: str | None

    def call(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        """The response's JSON (its text for a non-JSON answer); OperatorError otherwise."""
        import httpx

        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        query = _given(**(params or {}))
        try:
            with httpx.Client(base_url=self.url, headers=headers, timeout=TIMEOUT_S) as client:
                response = client.request(method, path, json=body, params=query)
        except httpx.ConnectError as exc:
            raise OperatorError(
                f"the server is not reachable at {self.url} ({exc}); start it with "
                "'governor serve', or point GOVERNOR_URL (or --url) at it"
            ) from None
        except httpx.TimeoutException:
            raise OperatorError(
                f"the server at {self.url} did not answer within {TIMEOUT_S:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise OperatorError(f"talking to {self.url} failed: {exc}") from None
        if response.is_success:
            is_json = response.headers.get("content-type", "").startswith("application/json")
            return response.json() if is_json else response.text
        raise OperatorError(_refusal(response.status_code, response.text, self.token))


def _refusal(status: int, text: str, token: str | None) -> str:
    try:
        error = json.loads(text)["error"]
        message = f"{error['message']} ({error['code']})"
    except (ValueError, KeyError, TypeError):
        message = text.strip()[:300] or "no details"
    if status == 401:
        what = "no token was sent" if not token else f"the token was refused: {message}"
        return (
            f"{what}. Set GOVERNOR_TOKEN (or --token) to an operator token: 'governor serve' "
            "prints one at first start, or set GOVERNOR_OPERATOR_TOKEN on the server"
        )
    return f"the server answered {status}: {message}"


# --- what the verbs print ---------------------------------------------------------------


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    cells = [[str(c) for c in headers], *([_text(c) for c in row] for row in rows)]
    if len(cells) == 1:
        return "(none)"
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def fields(pairs: Sequence[tuple[str, object]]) -> str:
    width = max(len(name) for name, _ in pairs)
    return "\n".join(f"{name.ljust(width)}  {_text(value)}" for name, value in pairs)


def _text(value: object) -> str:
    return "-" if value is None else str(value)


def usd(text: str | None) -> str:
    return "-" if text is None else dollars(Decimal(text))


def _budget_row(b: dict[str, Any]) -> tuple[object, ...]:
    return (
        b["id"],
        b["name"],
        b["state"],
        usd(b["effective_ceiling_usd"]),
        usd(b["spent_usd"]),
        usd(b["committed_usd"]),
        usd(b["remaining_usd"]),
        usd(b["burn_rate_usd_per_hour"]) + "/h",
    )


BUDGET_HEADERS = ("id", "name", "state", "ceiling", "spent", "committed", "remaining", "burn")


def show_budgets(budgets: list[dict[str, Any]]) -> str:
    return table(BUDGET_HEADERS, (_budget_row(b) for b in budgets))


def show_budget(b: dict[str, Any]) -> str:
    return fields(
        [
            ("id", b["id"]),
            ("name", b["name"]),
            ("state", b["state"]),
            ("ceiling", usd(b["ceiling_usd"])),
            ("approved extensions", usd(b["approved_extensions_usd"])),
            ("effective ceiling", usd(b["effective_ceiling_usd"])),
            ("reserve", usd(b["reserve_usd"])),
            ("spent", usd(b["spent_usd"])),
            ("committed", usd(b["committed_usd"])),
            ("remaining", usd(b["remaining_usd"])),
            ("burn rate", usd(b["burn_rate_usd_per_hour"]) + "/h"),
            ("exhausted at", b["projected_exhaustion_at"]),
            ("closed at", b["closed_at"]),
            ("note", b["note"]),
        ]
    )


def show_pod(p: dict[str, Any]) -> str:
    order = p["stop_order"]
    gpus = p["telemetry"]["gpus"]
    text = fields(
        [
            ("id", p["id"]),
            ("budget", p["budget_id"]),
            ("provider", f"{p['provider']} {p['provider_ref']}"),
            ("GPUs", f"{p['gpu_count'] or '?'} x {p['gpu_type']}" if p["gpu_type"] else None),
            ("node", p["node"]),
            ("state", p["state"]),
            ("rate", f"{usd(p['hourly_rate_usd'])}/h ({p['rate_source']})"),
            ("spent", usd(p["spent_usd"])),
            ("stop order", None if order is None else f"{order['id']} {order['state']}"),
            ("telemetry", p["telemetry"]["note"]),
        ]
    )
    if not gpus:
        return text
    rows = [
        (g["index"], g["uuid"], g["name"], g["utilization_pct"], g["memory_used_bytes"], g["at"])
        for g in gpus
    ]
    return text + "\n\n" + table(("gpu", "uuid", "name", "util %", "used bytes", "at"), rows)


def show_stop(o: dict[str, Any]) -> str:
    return fields(
        [
            ("stop order", o["id"]),
            ("pod", o["pod_id"]),
            ("reason", o["reason"]),
            ("state", o["state"]),
            ("save deadline", o["deadline"]),
        ]
    )


def show_run(r: dict[str, Any]) -> str:
    text = fields(
        [
            ("id", r["id"]),
            ("name", r["name"]),
            ("pod", r["pod_id"]),
            ("status", r["status"]),
            ("heartbeat timeout", f"{r['heartbeat_timeout_s']:g} s"),
            ("checkpoint grace", f"{r['checkpoint_grace_s']:g} s"),
        ]
    )
    return f"{text}\n\nThe job's token (shown once; give it to the job):\n  {r['token']}"


def show_resumed(r: dict[str, Any]) -> str:
    pod, run = r["pod"], r["run"]
    text = fields(
        [
            ("pod", pod["id"]),
            ("state", pod["state"]),
            ("rate", f"{usd(pod['hourly_rate_usd'])}/h ({pod['rate_source']})"),
        ]
    )
    if run is None:
        return text + "\n\nNo unfinished run stopped with this pod: create a run for the next job."
    checkpoint = run["checkpoint"]
    text += "\n" + fields(
        [
            ("run", f"{run['id']} ({run['name']}), attempt {run['attempt']}"),
            ("from", f"step {checkpoint['step']}, {checkpoint['path']}" if checkpoint else None),
        ]
    )
    return (
        f"{text}\n\nThe attempt's job token (shown once; the previous one has ended). Relaunch "
        f"the job with it:\n  {r['token']}"
    )


TOKEN_HEADERS = ("id", "role", "label", "for", "created", "expires", "state")


def _token_row(t: dict[str, Any]) -> tuple[object, ...]:
    bound = t["run_id"] or t["pod_id"] or t["node"] or ("bootstrap" if t["bootstrap"] else "")
    expired = t["expires_at"] and datetime.fromisoformat(t["expires_at"]) <= datetime.now(UTC)
    state = "revoked" if t["revoked_at"] else "expired" if expired else "active"
    return (t["id"], t["role"], t["label"], bound, t["created_at"], t["expires_at"], state)


def show_tokens(tokens: list[dict[str, Any]]) -> str:
    return table(TOKEN_HEADERS, (_token_row(t) for t in tokens))


def show_tokens_one(t: dict[str, Any]) -> str:
    return show_tokens([t])


def show_token(t: dict[str, Any]) -> str:
    bound = [("pod", t["pod_id"])] if t["pod_id"] else [("node", t["node"])] if t["node"] else []
    expires = ("expires", t["expires_at"] or "never")
    text = fields([("id", t["id"]), ("role", t["role"]), *bound, ("label", t["label"]), expires])
    return f"{text}\n\nThe token (shown once; store it now):\n  {t['token']}"


EXTENSION_HEADERS = ("id", "budget", "amount", "state", "by", "reason", "decided", "note")


def show_extensions(exts: list[dict[str, Any]]) -> str:
    rows = [
        (
            e["id"],
            e["budget_id"],
            usd(e["amount_usd"]),
            e["state"],
            e["requested_by"],
            e["reason"],
            e["decided_at"],
            e["decision_note"],
        )
        for e in exts
    ]
    return table(EXTENSION_HEADERS, rows)


def show_events(events: list[dict[str, Any]]) -> str:
    rows = [
        (e["id"], e["at"], e["severity"], e["category"], e["subject"], e["message"])
        for e in reversed(events)  # oldest first, the newest at the bottom
    ]
    return table(("id", "at", "severity", "category", "subject", "message"), rows)


# --- the verbs ---------------------------------------------------------------------------

Shown = tuple[Any, Callable[[Any], str]]  # what the server said, and how to show it
Verb = Callable[[Api, argparse.Namespace], Shown]


def budget_declare(api: Api, a: argparse.Namespace) -> Shown:
    body = _given(
        name=a.name,
        ceiling_usd=a.ceiling,
        reserve_usd=a.reserve,
        storage_tail_hours=a.storage_tail_hours,
        alert_thresholds=a.thresholds,
        note=a.note,
    )
    return api.call("POST", "/v1/budgets", body=body), show_budget


def budget_list(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("GET", "/v1/budgets"), show_budgets


def budget_show(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("GET", f"/v1/budgets/{a.budget_id}"), show_budget


def pod_add(api: Api, a: argparse.Namespace) -> Shown:
    body = _given(
        provider=a.provider,
        provider_ref=a.ref,
        hourly_rate_usd=a.rate,
        gpu_type=a.gpu_type,
        gpu_count=a.gpu_count,
        storage_gb=a.storage_gb,
        storage_usd_per_gb_month=a.storage_usd_per_gb_month,
        stopped_storage_usd_per_gb_month=a.stopped_storage_usd_per_gb_month,
        local=a.local or None,
        node=a.node,
        persistent_filesystem=a.persistent_filesystem,
    )
    return api.call("POST", f"/v1/budgets/{a.budget_id}/pods", body=body), show_pod


def pod_show(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("GET", f"/v1/pods/{a.pod_id}"), show_pod


def pod_stop(api: Api, a: argparse.Namespace) -> Shown:
    body = _given(reason=a.reason)
    return api.call("POST", f"/v1/pods/{a.pod_id}/stop", body=body), show_stop


def pod_resume(api: Api, a: argparse.Namespace) -> Shown:
    body = _given(reason=a.reason)
    return api.call("POST", f"/v1/pods/{a.pod_id}/resume", body=body), show_resumed


def budget_close(api: Api, a: argparse.Namespace) -> Shown:
    body = _given(reason=a.reason, storage_deleted=a.storage_deleted or None)
    return api.call("POST", f"/v1/budgets/{a.budget_id}/close", body=body), show_budget


def token_create(api: Api, a: argparse.Namespace) -> Shown:
    body = _given(role=a.role, label=a.label, pod_id=a.pod, node=a.node, expires_at=a.expires_at)
    return api.call("POST", "/v1/tokens", body=body), show_token


def token_list(api: Api, _: argparse.Namespace) -> Shown:
    return api.call("GET", "/v1/tokens"), show_tokens


def token_revoke(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("POST", f"/v1/tokens/{a.token_id}/revoke"), show_tokens_one


def run_create(api: Api, a: argparse.Namespace) -> Shown:
    body = _given(
        name=a.name,
        pod_id=a.pod,
        total_steps=a.total_steps,
        heartbeat_timeout_s=a.heartbeat_timeout_s,
        checkpoint_grace_s=a.checkpoint_grace_s,
    )
    return api.call("POST", f"/v1/budgets/{a.budget_id}/runs", body=body), show_run


def ext_list(api: Api, a: argparse.Namespace) -> Shown:
    params = {"budget_id": a.budget, "state": a.state}
    return api.call("GET", "/v1/extensions", params=params), show_extensions


def ext_decide(api: Api, a: argparse.Namespace) -> Shown:
    body = _given(note=a.note)
    path = f"/v1/extensions/{a.extension_id}/{a.decision}"
    return api.call("POST", path, body=body), lambda e: show_extensions([e])


def events(api: Api, a: argparse.Namespace) -> Shown:
    params = {
        "budget_id": a.budget,
        "severity": a.severity,
        "category": a.category,
        "subject": a.subject,
        "since": a.since,
        "limit": a.limit,
    }
    return api.call("GET", "/v1/events", params=params), show_events


def report(api: Api, a: argparse.Namespace) -> Shown:
    params = {"format": "json" if a.json else "md"}
    return api.call("GET", f"/v1/budgets/{a.budget_id}/report", params=params), str


def _given(**values: Any) -> dict[str, Any]:
    """The values the operator gave: the server applies its defaults to the rest."""
    return {k: v for k, v in values.items() if v is not None}


def _runner(verb: Verb) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            data, show = verb(Api(args.url.rstrip("/"), args.token), args)
        except OperatorError as exc:
            print(f"governor: {exc}", file=sys.stderr)
            return 1
        print(json.dumps(data, indent=2) if args.json else show(data).rstrip("\n"))
        return 0

    return run


# --- the command line --------------------------------------------------------------------


def _connection() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url",
        default=os.environ.get("GOVERNOR_URL", DEFAULT_URL),
        help=f"the governor's URL (or GOVERNOR_URL; default {DEFAULT_URL})",
    )
    common.add_argument(
        "--token",
        default=os.environ.get("GOVERNOR_TOKEN"),
        help="an operator token (or GOVERNOR_TOKEN)",
    )
    common.add_argument("--json", action="store_true", help="print the server's JSON")
    return common


def _thresholds(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("a comma-separated list of percentages") from None


def add_verbs(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> dict[str, Any]:
    """Register the operator verbs as subcommands of `governor`; returns each group's verbs,
    for the commands that work on the database directly to join them."""
    common = _connection()

    def verb(group: Any, name: str, what: str, handler: Verb) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = group.add_parser(
            name, help=what, description=what, parents=[common]
        )
        parser.set_defaults(handler=_runner(handler))
        return parser

    def group(name: str, what: str) -> Any:
        parser = commands.add_parser(name, help=what, description=what)
        return parser.add_subparsers(dest=f"{name}_verb", required=True, metavar="VERB")

    budgets = group("budget", "declare, list, show and close budgets (over HTTP)")
    declare = verb(budgets, "declare", "declare a budget and its hard ceiling", budget_declare)
    declare.add_argument("name", help="the budget's name")
    declare.add_argument("--ceiling", required=True, metavar="USD", help="the hard ceiling")
    declare.add_argument("--reserve", metavar="USD", help="held back for post-stop work")
    declare.add_argument(
        "--storage-tail-hours", type=float, metavar="H", help="how long stopped volumes are kept"
    )
    declare.add_argument(
        "--thresholds", type=_thresholds, metavar="PCTS", help="alert thresholds, e.g. 50,80,90"
    )
    declare.add_argument("--note", help="what the budget covers")
    verb(budgets, "list", "every budget with its figures", budget_list)
    verb(budgets, "show", "one budget with its figures", budget_show).add_argument("budget_id")
    closing = verb(
        budgets, "close", "close a budget whose pods have stopped; its runs end", budget_close
    )
    closing.add_argument("budget_id")
    closing.add_argument("--reason", help="why (recorded)")
    closing.add_argument(
        "--storage-deleted",
        action="store_true",
        help="you have deleted its stopped pods' storage: they stop counting (nothing is "
        "deleted for you)",
    )

    pods = group("pod", "add, show, stop and resume pods (over HTTP)")
    add = verb(pods, "add", "put a pod under a budget", pod_add)
    add.add_argument("budget_id")
    add.add_argument("--provider", required=True, help="e.g. fake")
    add.add_argument("--ref", required=True, help="the provider's id of the pod")
    add.add_argument("--rate", metavar="USD", help="hourly rate, if the provider reports none")
    add.add_argument("--gpu-type")
    add.add_argument("--gpu-count", type=int)
    add.add_argument("--storage-gb", type=float)
    add.add_argument("--storage-usd-per-gb-month", metavar="USD")
    add.add_argument("--stopped-storage-usd-per-gb-month", metavar="USD")
    add.add_argument("--local", action="store_true", help="the server samples its own GPUs")
    add.add_argument("--node", help="the machine it runs on: that node's agent reports for it")
    add.add_argument(
        "--persistent-filesystem",
        metavar="NAME",
        help="terminate-only providers (lambda): the filesystem checkpoints must be saved on",
    )
    verb(pods, "show", "a pod with its spend, stop order and GPUs", pod_show).add_argument("pod_id")
    stop = verb(pods, "stop", "stop a pod, keeping its workspace, after its job saves", pod_stop)
    stop.add_argument("pod_id")
    stop.add_argument("--reason", help="why (recorded)")
    again = verb(
        pods,
        "resume",
        "start a stopped pod again once its budget is open; prints its run's new job token",
        pod_resume,
    )
    again.add_argument("pod_id")
    again.add_argument("--reason", help="why (recorded)")

    runs = group("run", "create runs (over HTTP)")
    create = verb(runs, "create", "create a run; prints its job token once", run_create)
    create.add_argument("budget_id")
    create.add_argument("--pod", required=True, help="the pod it runs on")
    create.add_argument("--name", required=True)
    create.add_argument("--total-steps", type=int)
    create.add_argument("--heartbeat-timeout-s", type=float)
    create.add_argument("--checkpoint-grace-s", type=float)

    tokens = group("token", "create, list and revoke tokens")
    token = verb(tokens, "create", "create a token; prints it once", token_create)
    token.add_argument("--role", required=True, choices=["operator", "viewer", "agent"])
    whom = token.add_mutually_exclusive_group()
    whom.add_argument("--pod", help="an agent token for this pod")
    whom.add_argument("--node", help="a node agent's token for this machine")
    token.add_argument("--label", help="who or what it is for (recorded)")
    token.add_argument(
        "--expires-at", metavar="TIME", help="ISO 8601 time it stops working (default: never)"
    )
    verb(tokens, "list", "every token: whom it is for, whether it still works", token_list)
    revoking = verb(tokens, "revoke", "end a token now", token_revoke)
    revoking.add_argument("token_id")

    exts = group("ext", "list, approve and deny budget extensions (over HTTP)")
    listing = verb(exts, "list", "extension requests", ext_list)
    listing.add_argument("--budget", help="only this budget's")
    listing.add_argument("--state", help="pending, approved, denied or expired")
    for decision in ("approve", "deny"):
        decide = verb(exts, decision, f"{decision} a pending extension (once)", ext_decide)
        decide.add_argument("extension_id")
        decide.add_argument("--note", help="recorded with the decision")
        decide.set_defaults(decision=decision)

    log = verb(commands, "events", "the event log, oldest first (over HTTP)", events)
    log.add_argument("--budget", help="only this budget's")
    log.add_argument("--severity", help="info, warning or critical")
    log.add_argument("--category", help="budget, telemetry, provider, harness, model, ...")
    log.add_argument("--subject", help="e.g. pod:pod_123")
    log.add_argument("--since", help="ISO 8601 time")
    log.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")

    record = verb(commands, "report", "a budget's run report, as Markdown (over HTTP)", report)
    record.add_argument("budget_id")
    return {"token": tokens}
