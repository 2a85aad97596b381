"""The operator commands against a scripted governor: each command parsed and run as `main` runs
it, its HTTP client over httpx.MockTransport, what it printed and sent kept for the test."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from governor.cli import run_command
from governor.cli.parser import build_parser

URL = "http://governor.test"
TOKEN = "gov_op_unit"

BUDGET_ID = "bud_00000000000000a1"
POD_ID = "pod_00000000000000b1"
RUN_ID = "run_00000000000000c1"
TOKEN_ID = "tok_00000000000000d1"
EXTENSION_ID = "ext_00000000000000e1"


@dataclass(frozen=True)
class Ran:
    """What a command did: its exit status, what it printed, and the requests it sent."""

    code: int
    out: str
    err: str
    requests: list[httpx.Request]

    @property
    def sent(self) -> list[tuple[str, str]]:
        """Each request as its method and its path with the query."""
        return [(r.method, r.url.raw_path.decode()) for r in self.requests]

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]


def body(request: httpx.Request) -> Any:
    """The JSON a request sent (None when it sent no body)."""
    return json.loads(request.content) if request.content else None


@dataclass
class Governor:
    """The governor's API as a script. A list path answers with the items it was given, those
    its `name` and `budget_id` query ask for (as the server filters), in one page; any other
    request is answered as `answer` set it (its answers in turn, the last one again after), or,
    once `always` is set, every request so."""

    capsys: pytest.CaptureFixture[str]
    lists: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    answers: dict[tuple[str, str], list[httpx.Response]] = field(default_factory=dict)
    always: httpx.Response | Exception | None = None

    def has(self, path: str, *items: dict[str, Any]) -> None:
        self.lists[path] = list(items)

    def answer(self, method: str, path: str, *answers: Any, status: int = 200) -> None:
        """Answer `method path` with `answers`, each as JSON, or as plain text if a string."""
        self.answers[(method, path)] = [respond(status, answer) for answer in answers]

    def run(self, *argv: str, token: str | None = TOKEN) -> Ran:
        requests: list[httpx.Request] = []

        def handle(request: httpx.Request) -> httpx.Response:
            requests.append(request)
            return self._handle(request)

        connection = ["--url", URL, *([] if token is None else ["--token", token])]
        args = build_parser().parse_args([*argv, *connection])
        code = run_command(args, transport=httpx.MockTransport(handle))
        out, err = self.capsys.readouterr()
        return Ran(code, out, err, requests)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        if isinstance(self.always, Exception):
            raise self.always
        if self.always is not None:
            return copy_of(self.always)
        key = (request.method, request.url.path)
        if key in self.answers:
            answers = self.answers[key]
            return copy_of(answers.pop(0) if len(answers) > 1 else answers[0])
        if request.method == "GET" and request.url.path in self.lists:
            asked = {
                k: request.url.params[k] for k in ("name", "budget_id") if k in request.url.params
            }
            items = [i for i in self.lists[request.url.path] if asked.items() <= i.items()]
            return httpx.Response(200, json={"items": items, "next_cursor": None})
        raise AssertionError(f"unexpected {request.method} {request.url}")


def respond(status: int, answer: Any) -> httpx.Response:
    if isinstance(answer, str):
        return httpx.Response(status, text=answer)
    return httpx.Response(status, json=answer)


def copy_of(response: httpx.Response) -> httpx.Response:
    """The same answer again, unread: a response is read once."""
    return httpx.Response(response.status_code, headers=response.headers, content=response.content)


def error(status: int, code: str, message: str) -> httpx.Response:
    """An error as the server answers it."""
    return respond(status, {"error": {"code": code, "message": message}})


def page(*items: dict[str, Any], next_cursor: str | None = None) -> dict[str, Any]:
    return {"items": list(items), "next_cursor": next_cursor}


# --- what the server answers, in its shapes (governor.api.schemas) ---------------------------


def budget_out(**changes: Any) -> dict[str, Any]:
    return {
        "id": BUDGET_ID,
        "name": "pilot",
        "team_id": "team_default",
        "state": "open",
        "require_plan": False,
        "adopt_labelled_pods": False,
        "ceiling_usd": "1000.00",
        "approved_extensions_usd": "50.00",
        "effective_ceiling_usd": "1050.00",
        "reserve_usd": "25.00",
        "spent_usd": "412.5",
        "shutdown_usd": "12.00",
        "storage_tail_usd": "5.50",
        "committed_usd": "430.00",  # spent + shutdown + storage tail + reserve
        "held_for_plans_usd": "100.00",
        "reserved_for_launches_usd": "0.00",
        "remaining_usd": "620.00",
        "burn_rate_usd_per_hour": "3.6",
        "projected_exhaustion_at": "2026-05-01T12:00:00+00:00",
        "closed_at": None,
        "note": "the pilot",
        "created_at": "2026-04-01T09:00:00+00:00",
        **changes,
    }


def gpu_out(**changes: Any) -> dict[str, Any]:
    return {
        "index": 0,
        "uuid": "GPU-1",
        "name": "H100",
        "utilization_pct": 94.93333333333334,
        "memory_used_bytes": 13_207_024_435,
        "memory_total_bytes": 80 * 1024**3,
        "at": "2026-04-01T10:00:00+00:00",
        **changes,
    }


def pod_out(**changes: Any) -> dict[str, Any]:
    return {
        "id": POD_ID,
        "name": "gpu-a",
        "budget_id": BUDGET_ID,
        "provider": "fake",
        "provider_ref": "ref-1",
        "gpu_type": "H100",
        "gpu_count": 1,
        "plan_id": None,
        "node": None,
        "state": "running",
        "hourly_rate_usd": "3.60",
        "rate_source": "provider",
        "spent_usd": "12.00",
        "stop_order": None,
        "terminate_only": False,
        "acknowledged_loss": None,
        "telemetry": {"gpus": [], "note": "no agent has reported"},
        **changes,
    }


def run_out(**changes: Any) -> dict[str, Any]:
    return {
        "id": RUN_ID,
        "name": "sft",
        "budget_id": BUDGET_ID,
        "pod_id": POD_ID,
        "status": "running",
        "attempt": 1,
        "phase": "training",
        "step": 1200,
        "total_steps": 10000,
        "last_heartbeat_at": "2026-04-01T10:00:00+00:00",
        "checkpoint": {"step": 1000, "path": "/ckpt/1000"},
        "directive": {"action": "continue", "reason": None},
        "heartbeat_timeout_s": 120.0,
        "checkpoint_grace_s": 0.5,
        "ended_at": None,
        "acknowledged_at": None,
        "acknowledged_by": None,
        **changes,
    }


def stop_out(**changes: Any) -> dict[str, Any]:
    return {
        "id": "stp_00000000000000f1",
        "pod_id": POD_ID,
        "reason": "manual",
        "state": "checkpoint_requested",
        "deadline": "2026-04-01T10:05:00+00:00",
        **changes,
    }


def token_out(**changes: Any) -> dict[str, Any]:
    return {
        "id": TOKEN_ID,
        "role": "operator",
        "label": "ops",
        "run_id": None,
        "pod_id": None,
        "node": None,
        "teams": None,
        "bootstrap": False,
        "created_at": "2026-04-01T09:00:00+00:00",
        "expires_at": None,
        "revoked_at": None,
        **changes,
    }


def extension_out(**changes: Any) -> dict[str, Any]:
    return {
        "id": EXTENSION_ID,
        "budget_id": BUDGET_ID,
        "amount_usd": "50.00",
        "state": "pending",
        "requested_by": "operator",
        "reason": "one more eval",
        "decided_at": None,
        "decision_note": None,
        **changes,
    }


def event_out(id: int, **changes: Any) -> dict[str, Any]:
    return {
        "id": id,
        "at": f"2026-04-01T10:0{id}:00+00:00",
        "severity": "info",
        "category": "budget",
        "subject": f"budget:{BUDGET_ID}",
        "message": f"event {id}",
        "pod_id": None,
        "pod_name": None,
        "run_id": None,
        "run_name": None,
        **changes,
    }
