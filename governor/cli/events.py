"""`governor events`: the event log's latest events, shown oldest first."""

from __future__ import annotations

import argparse
from typing import Any

from governor.cli.http import Api
from governor.cli.names import budget_filter
from governor.cli.output import paged, table
from governor.cli.verbs import Commands, Shown, budget_option, page, paging, verb
from governor.domain.model import Severity

SEVERITIES = tuple(s.value for s in Severity)


def show_events(events: list[dict[str, Any]]) -> str:
    rows = [
        (
            e["id"],
            e["at"],
            e["severity"],
            e["category"],
            e["subject"],
            e["pod_name"],
            e["run_name"],
            e["message"],
        )
        for e in reversed(events)  # oldest first, the newest at the bottom
    ]
    headers = ("id", "at", "severity", "category", "subject", "pod", "run", "message")
    return table(headers, rows)


def events(api: Api, a: argparse.Namespace) -> Shown:
    params = {
        "budget_id": budget_filter(api, a.budget),
        "min_severity": a.severity,
        "category": a.category,
        "subject": a.subject,
        "since": a.since,
        **page(a),
    }
    return api.call("GET", "/v1/events", params=params), paged(show_events)


def add_command(commands: Commands) -> None:
    log = verb(
        commands, "events", "the event log's latest events, shown oldest first (over HTTP)", events
    )
    budget_option(log)
    log.add_argument(
        "--severity",
        choices=SEVERITIES,
        help="this severity or worse: warning brings warning and critical events",
    )
    log.add_argument("--category", help="budget, telemetry, provider, harness, model, ...")
    log.add_argument("--subject", help="e.g. pod:pod_123")
    log.add_argument("--since", help="ISO 8601 time")
    paging(log, "the latest (the next page: those before)")
