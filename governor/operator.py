"""Operator verbs over HTTP: `budget`, `pod`, `run`, `ext`, `token`, `events` and `report`.

Each verb is an API call made with the operator token (GOVERNOR_URL, GOVERNOR_TOKEN or
--url, --token). A budget, pod or run is named by its id or by its name: a name is looked up
first (one more call), and a name that matches none or several is refused with the
candidates. Output is a readable table by default, money right-aligned, and the server's
JSON with --json. Any failure exits 1 with one line that says what to do: the server is not
reachable, the token is missing or refused, no such name, or the server's own error message.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from governor.domain.model import RunStatus, Severity
from governor.domain.money import dollars

DEFAULT_URL = "http://127.0.0.1:8000"
TIMEOUT_S = 30.0
PAGE = 100  # a list verb's items per page unless --limit says otherwise
WHOLE_PAGE = 1000  # the server's largest page: what a lookup reads per call


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

    def items(self, path: str, params: dict[str, Any] | None = None) -> list[Any]:
        """Every item of a list, page after page."""
        found: list[Any] = []
        query: dict[str, Any] = {**(params or {}), "limit": WHOLE_PAGE}
        while True:
            page = self.call("GET", path, params=query)
            found.extend(page["items"])
            if page["next_cursor"] is None:
                return found
            query["cursor"] = page["next_cursor"]


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


def table(
    headers: Sequence[str], rows: Iterable[Sequence[object]], right: Sequence[int] = ()
) -> str:
    """Columns padded to their widest cell; those numbered in `right` (money, figures) are
    right-aligned, so that their digits line up."""
    cells = [[str(c) for c in headers], *([_text(c) for c in row] for row in rows)]
    if len(cells) == 1:
        return "(none)"
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in cells
    ]
    return "\n".join(line.rstrip() for line in lines)


def fields(pairs: Sequence[tuple[str, object]]) -> str:
    width = max(len(name) for name, _ in pairs)
    return "\n".join(f"{name.ljust(width)}  {_text(value)}" for name, value in pairs)


def _text(value: object) -> str:
    return "-" if value is None else str(value)


def usd(text: str | None) -> str:
    return "-" if text is None else dollars(Decimal(text))


GIB = 1024**3


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} %"


def gib(used: int | None, total: int | None) -> str:
    """Memory as people read it: `12.3 / 80.0 GiB`."""
    if used is None:
        return "-"
    return f"{used / GIB:.1f} GiB" if total is None else f"{used / GIB:.1f} / {total / GIB:.1f} GiB"


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
    return table(BUDGET_HEADERS, (_budget_row(b) for b in budgets), right=range(3, 8))


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
            ("name", p["name"]),
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
        (
            g["index"],
            g["uuid"],
            g["name"],
            pct(g["utilization_pct"]),
            gib(g["memory_used_bytes"], g["memory_total_bytes"]),
            g["at"],
        )
        for g in gpus
    ]
    headers = ("gpu", "uuid", "name", "util", "memory", "at")
    return text + "\n\n" + table(headers, rows, right=(3, 4))


POD_HEADERS = ("id", "name", "budget", "provider", "GPUs", "state", "rate", "spent")


def show_pods(pods: list[dict[str, Any]], budgets: dict[str, str]) -> str:
    rows = [
        (
            p["id"],
            p["name"],
            budgets.get(p["budget_id"], p["budget_id"]),
            f"{p['provider']} {p['provider_ref']}",
            f"{p['gpu_count'] or '?'} x {p['gpu_type']}" if p["gpu_type"] else None,
            p["state"],
            usd(p["hourly_rate_usd"]) + "/h",
            usd(p["spent_usd"]),
        )
        for p in pods
    ]
    return table(POD_HEADERS, rows, right=(6, 7))


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
        ]
    )
    if "token" not in r:
        return text
    return f"{text}\n\nThe job's token (shown once; give it to the job):\n  {r['token']}"


RUN_HEADERS = ("id", "name", "budget", "pod", "status", "phase", "step", "last heartbeat")


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


def paged(show: Callable[[list[Any]], str]) -> Callable[[dict[str, Any]], str]:
    """A page shown as `show` shows its items, with how to read the next one if there is."""

    def shown(page: dict[str, Any]) -> str:
        text = show(page["items"])
        if page["next_cursor"] is None:
            return text
        return (
            f"{text}\n\n{len(page['items'])} shown; there are more: run the same command "
            f"with --cursor {page['next_cursor']}"
        )

    return shown


def show_events(events: list[dict[str, Any]]) -> str:
    rows = [
        (e["id"], e["at"], e["severity"], e["category"], e["subject"], e["message"])
        for e in reversed(events)  # oldest first, the newest at the bottom
    ]
    return table(("id", "at", "severity", "category", "subject", "message"), rows)


# --- names -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """What a name or an id may name: its word, its ids' prefix, its list and its state."""

    noun: str
    prefix: str
    path: str
    state: str

    def is_id(self, given: str) -> bool:
        return re.fullmatch(rf"{self.prefix}_[0-9a-f]{{16}}", given) is not None

    def candidate(self, found: dict[str, Any], budgets: dict[str, str]) -> str:
        """One of several that share a name, told apart: where it is (its budget by name and
        id), and its state."""
        if "budget_id" in found:
            budget_id = found["budget_id"]
            name = budgets.get(budget_id)
            where = f"budget {budget_id}" if name is None else f"budget {name!r} {budget_id}"
        else:
            where = f"declared {found['created_at'][:10]}"
        return f"{found['id']} ({where}, {found[self.state]})"


BUDGET = Kind("budget", "bud", "/v1/budgets", "state")
POD = Kind("pod", "pod", "/v1/pods", "state")
RUN = Kind("run", "run", "/v1/runs", "status")


def resolve(api: Api, kind: Kind, given: str, budget_id: str | None = None) -> str:
    """The id of the budget, pod or run that `given` names: an id as it is; a name looked
    up (within `budget_id`, if given), which must match exactly one — or, for a budget, one
    not closed (a closed budget's name is free for a new one, which the name then means)."""
    if kind.is_id(given):
        return given
    found = api.items(kind.path, {"name": given, "budget_id": budget_id})
    within = "" if budget_id is None else f" in budget {budget_id}"
    if not found:
        raise OperatorError(
            f"no {kind.noun} named {given!r}{within}; 'governor {kind.noun} list' shows them"
        )
    if kind is BUDGET and len(found) > 1:
        found = [f for f in found if f["state"] != "closed"] or found
    if len(found) > 1:
        budgets = {} if kind is BUDGET else _names(api, BUDGET)
        candidates = ", ".join(kind.candidate(f, budgets) for f in found)
        raise OperatorError(
            f"{len(found)} {kind.noun}s are named {given!r}{within}: {candidates}; give the id"
        )
    return str(found[0]["id"])


def _budget(api: Api, given: str | None) -> str | None:
    return None if given is None else resolve(api, BUDGET, given)


def _names(api: Api, kind: Kind, **params: Any) -> dict[str, str]:
    """Each id of that kind, mapped to its name (for tables that would show bare ids)."""
    return {f["id"]: f["name"] for f in api.items(kind.path, params)}


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
    return api.call("GET", "/v1/budgets", params=_page(a)), paged(show_budgets)


def budget_show(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("GET", f"/v1/budgets/{resolve(api, BUDGET, a.budget)}"), show_budget


def pod_add(api: Api, a: argparse.Namespace) -> Shown:
    budget_id = resolve(api, BUDGET, a.budget)
    body = _given(
        provider=a.provider,
        provider_ref=a.ref,
        name=a.name,
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
    return api.call("POST", f"/v1/budgets/{budget_id}/pods", body=body), show_pod


def pod_list(api: Api, a: argparse.Namespace) -> Shown:
    pods = api.call("GET", "/v1/pods", params={"budget_id": _budget(api, a.budget), **_page(a)})
    budgets = _names(api, BUDGET)
    return pods, paged(lambda p: show_pods(p, budgets))


def pod_show(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("GET", f"/v1/pods/{resolve(api, POD, a.pod)}"), show_pod


def pod_stop(api: Api, a: argparse.Namespace) -> Shown:
    body = _given(reason=a.reason)
    return api.call("POST", f"/v1/pods/{resolve(api, POD, a.pod)}/stop", body=body), show_stop


def pod_resume(api: Api, a: argparse.Namespace) -> Shown:
    body = _given(reason=a.reason)
    path = f"/v1/pods/{resolve(api, POD, a.pod)}/resume"
    return api.call("POST", path, body=body), show_resumed


def budget_close(api: Api, a: argparse.Namespace) -> Shown:
    body = _given(reason=a.reason, storage_deleted=a.storage_deleted or None)
    path = f"/v1/budgets/{resolve(api, BUDGET, a.budget)}/close"
    return api.call("POST", path, body=body), show_budget


def token_create(api: Api, a: argparse.Namespace) -> Shown:
    pod_id = None if a.pod is None else resolve(api, POD, a.pod)
    body = _given(role=a.role, label=a.label, pod_id=pod_id, node=a.node, expires_at=a.expires_at)
    return api.call("POST", "/v1/tokens", body=body), show_token


def token_list(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("GET", "/v1/tokens", params=_page(a)), paged(show_tokens)


def token_revoke(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("POST", f"/v1/tokens/{a.token_id}/revoke"), show_tokens_one


def run_create(api: Api, a: argparse.Namespace) -> Shown:
    budget_id = resolve(api, BUDGET, a.budget)
    body = _given(
        name=a.name,
        pod_id=resolve(api, POD, a.pod, budget_id),
        total_steps=a.total_steps,
        heartbeat_timeout_s=a.heartbeat_timeout_s,
        checkpoint_grace_s=a.checkpoint_grace_s,
    )
    return api.call("POST", f"/v1/budgets/{budget_id}/runs", body=body), show_run


def run_list(api: Api, a: argparse.Namespace) -> Shown:
    budget_id = _budget(api, a.budget)
    params = {"budget_id": budget_id, "status": a.state, **_page(a)}
    runs = api.call("GET", "/v1/runs", params=params)
    budgets, pods = _names(api, BUDGET), _names(api, POD, budget_id=budget_id)
    return runs, paged(lambda r: show_runs(r, budgets, pods))


def run_show(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("GET", f"/v1/runs/{resolve(api, RUN, a.run)}"), show_run


def ext_list(api: Api, a: argparse.Namespace) -> Shown:
    params = {"budget_id": _budget(api, a.budget), "state": a.state, **_page(a)}
    exts = api.call("GET", "/v1/extensions", params=params)
    budgets = _names(api, BUDGET)
    return exts, paged(lambda e: show_extensions(e, budgets))


def ext_request(api: Api, a: argparse.Namespace) -> Shown:
    body = {"amount_usd": a.amount, "reason": a.reason}
    path = f"/v1/budgets/{resolve(api, BUDGET, a.budget)}/extensions"
    return _one_extension(api, api.call("POST", path, body=body))


def ext_decide(api: Api, a: argparse.Namespace) -> Shown:
    body = _given(note=a.note)
    path = f"/v1/extensions/{a.extension_id}/{a.decision}"
    return _one_extension(api, api.call("POST", path, body=body))


def _one_extension(api: Api, extension: dict[str, Any]) -> Shown:
    budgets = _names(api, BUDGET)
    return extension, lambda e: show_extensions([e], budgets)


def events(api: Api, a: argparse.Namespace) -> Shown:
    params = {
        "budget_id": _budget(api, a.budget),
        "min_severity": a.severity,
        "category": a.category,
        "subject": a.subject,
        "since": a.since,
        **_page(a),
    }
    return api.call("GET", "/v1/events", params=params), paged(show_events)


def report(api: Api, a: argparse.Namespace) -> Shown:
    params = {"format": "json" if a.json else "md"}
    path = f"/v1/budgets/{resolve(api, BUDGET, a.budget)}/report"
    return api.call("GET", path, params=params), str


def _page(a: argparse.Namespace) -> dict[str, Any]:
    return {"limit": a.limit, "cursor": a.cursor}


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


RUN_STATES = tuple(s.value for s in RunStatus)
SEVERITIES = tuple(s.value for s in Severity)


def _paging(parser: argparse.ArgumentParser, order: str) -> None:
    parser.add_argument(
        "--limit", type=int, default=PAGE, help=f"at most this many, {order} (default {PAGE})"
    )
    parser.add_argument(
        "--cursor", help="the next page: the cursor the previous page's output ends with"
    )


def _budget_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("budget", metavar="BUDGET", help="the budget's name or id")


def _pod_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pod", metavar="POD", help="the pod's name or id")


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
    _paging(verb(budgets, "list", "budgets with their figures", budget_list), "oldest first")
    _budget_arg(verb(budgets, "show", "one budget with its figures", budget_show))
    closing = verb(
        budgets, "close", "close a budget whose pods have stopped; its runs end", budget_close
    )
    _budget_arg(closing)
    closing.add_argument("--reason", help="why (recorded)")
    closing.add_argument(
        "--storage-deleted",
        action="store_true",
        help="you have deleted its stopped pods' storage: they stop counting (nothing is "
        "deleted for you)",
    )

    pods = group("pod", "add, list, show, stop and resume pods (over HTTP)")
    add = verb(pods, "add", "put a pod under a budget", pod_add)
    _budget_arg(add)
    add.add_argument("--provider", required=True, help="e.g. fake")
    add.add_argument("--ref", required=True, help="the provider's id of the pod")
    add.add_argument(
        "--name", help="what to call it, unique within the budget (default: the --ref)"
    )
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
    listing = verb(pods, "list", "pods with their state, rate and spend", pod_list)
    listing.add_argument("--budget", metavar="BUDGET", help="only this budget's (name or id)")
    _paging(listing, "oldest first")
    _pod_arg(verb(pods, "show", "a pod with its spend, stop order and GPUs", pod_show))
    stop = verb(pods, "stop", "stop a pod, keeping its workspace, after its job saves", pod_stop)
    _pod_arg(stop)
    stop.add_argument("--reason", help="why (recorded)")
    again = verb(
        pods,
        "resume",
        "start a stopped pod again once its budget is open; prints its run's new job token",
        pod_resume,
    )
    _pod_arg(again)
    again.add_argument("--reason", help="why (recorded)")

    runs = group("run", "create, list and show runs (over HTTP)")
    create = verb(runs, "create", "create a run; prints its job token once", run_create)
    _budget_arg(create)
    create.add_argument(
        "--pod", required=True, metavar="POD", help="the pod it runs on (name or id)"
    )
    create.add_argument("--name", required=True)
    create.add_argument("--total-steps", type=int)
    create.add_argument("--heartbeat-timeout-s", type=float)
    create.add_argument("--checkpoint-grace-s", type=float)
    listing = verb(runs, "list", "runs with their status, phase and step", run_list)
    listing.add_argument("--budget", metavar="BUDGET", help="only this budget's (name or id)")
    listing.add_argument(
        "--state",
        choices=RUN_STATES,
        metavar="STATE",
        help=f"only runs in this state: {', '.join(RUN_STATES)}",
    )
    _paging(listing, "oldest first")
    shown = verb(runs, "show", "a run with its step, checkpoint and directive", run_show)
    shown.add_argument("run", metavar="RUN", help="the run's name or id")

    tokens = group("token", "create, list and revoke tokens")
    token = verb(tokens, "create", "create a token; prints it once", token_create)
    token.add_argument("--role", required=True, choices=["operator", "viewer", "agent"])
    whom = token.add_mutually_exclusive_group()
    whom.add_argument("--pod", metavar="POD", help="an agent token for this pod (name or id)")
    whom.add_argument("--node", help="a node agent's token for this machine")
    token.add_argument("--label", help="who or what it is for (recorded)")
    token.add_argument(
        "--expires-at", metavar="TIME", help="ISO 8601 time it stops working (default: never)"
    )
    _paging(
        verb(tokens, "list", "tokens: whom each is for, whether it still works", token_list),
        "newest first",
    )
    revoking = verb(tokens, "revoke", "end a token now", token_revoke)
    revoking.add_argument("token_id")

    exts = group("ext", "request, list, approve and deny budget extensions (over HTTP)")
    asking = verb(
        exts,
        "request",
        "ask for more budget; it changes nothing until an operator approves it",
        ext_request,
    )
    _budget_arg(asking)
    asking.add_argument("--amount", required=True, metavar="USD", help="how much more")
    asking.add_argument("--reason", required=True, help="what it is for (recorded)")
    listing = verb(exts, "list", "extension requests", ext_list)
    listing.add_argument("--budget", metavar="BUDGET", help="only this budget's (name or id)")
    listing.add_argument("--state", help="pending, approved, denied or expired")
    _paging(listing, "oldest first")
    for decision in ("approve", "deny"):
        decide = verb(exts, decision, f"{decision} a pending extension (once)", ext_decide)
        decide.add_argument("extension_id")
        decide.add_argument("--note", help="recorded with the decision")
        decide.set_defaults(decision=decision)

    log = verb(
        commands, "events", "the event log's latest events, shown oldest first (over HTTP)", events
    )
    log.add_argument("--budget", metavar="BUDGET", help="only this budget's (name or id)")
    log.add_argument(
        "--severity",
        choices=SEVERITIES,
        help="this severity or worse: warning brings warning and critical events",
    )
    log.add_argument("--category", help="budget, telemetry, provider, harness, model, ...")
    log.add_argument("--subject", help="e.g. pod:pod_123")
    log.add_argument("--since", help="ISO 8601 time")
    _paging(log, "the latest (the next page: those before)")

    record = verb(commands, "report", "a budget's run report, as Markdown (over HTTP)", report)
    _budget_arg(record)
    return {"token": tokens}
