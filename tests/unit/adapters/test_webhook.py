"""Webhook sinks over an injected transport: the two body shapes, the event id on every POST,
and which answers are worth another attempt."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

import httpx
import pytest

from governor.adapters.notify.webhook import WebhookSink
from governor.domain.ledger import Figures
from governor.domain.model import Category, Severity
from governor.domain.notice import Money, Notice, Outcome

NOTICE = Notice(
    event_id=42,
    at=datetime(2026, 1, 1, 12, tzinfo=UTC),
    severity=Severity.CRITICAL,
    category=Category.PROVIDER,
    subject="pod:pod_1",
    message="The provider refused to stop the pod <pod-1> & it is still billing.",
    budget_id="bud_1",
    evidence={"attempts": 3},
    budget_name="llama <lora> & co",
    # committed spend 4,212.345: spent 4,195.50 + shutdown 2.345 + storage tail 4.50 + reserve 10
    money=Money(
        Figures(
            spent=Decimal("4195.5"),
            shutdown=Decimal("2.345"),
            storage_tail=Decimal("4.5"),
            reserve=Decimal("10"),
            effective_ceiling=Decimal("4200"),
            burn_per_hour=Decimal("12"),
            projected_exhaustion_at=None,
        )
    ),
)
BARE = replace(NOTICE, budget_id=None, budget_name=None, money=None)
DASHBOARD = "https://governor.example.test"


def sink(
    kind: str,
    answer: httpx.Response | Exception,
    seen: list[httpx.Request],
    public_url: str | None = DASHBOARD,
) -> WebhookSink:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if isinstance(answer, Exception):
            raise answer
        return answer

    client = httpx.Client(transport=httpx.MockTransport(handle))
    return WebhookSink(
        "https://hooks.example.test/services/T0/B0/secret", kind, client, public_url=public_url
    )


def test_the_json_body_is_the_event_with_its_budget_money_and_link() -> None:
    seen: list[httpx.Request] = []
    assert sink("json", httpx.Response(204), seen).send(NOTICE).outcome is Outcome.DELIVERED
    [request] = seen
    assert request.headers["Idempotency-Key"] == "governor-event-42"
    assert json.loads(request.content) == {
        "source": "gpu-governor",
        "event": {
            "id": 42,
            "at": "2026-01-01T12:00:00+00:00",
            "severity": "critical",
            "category": "provider",
            "subject": "pod:pod_1",
            "budget_id": "bud_1",
            "message": NOTICE.message,
            "evidence": {"attempts": 3},
        },
        "budget": {
            "id": "bud_1",
            "name": "llama <lora> & co",
            "spent_usd": "4195.50",
            "shutdown_usd": "2.345",
            "storage_tail_usd": "4.50",
            "reserve_usd": "10.00",
            "committed_usd": "4212.345",
            "ceiling_usd": "4200.00",
            "remaining_usd": "-12.345",
        },
        "link": "https://governor.example.test/status/budgets/bud_1",
    }


def test_without_a_budget_or_a_public_url_the_json_body_says_so() -> None:
    seen: list[httpx.Request] = []
    sink("json", httpx.Response(204), seen, public_url=None).send(BARE)
    body = json.loads(seen[0].content)
    assert body["budget"] is None and body["link"] is None


def test_the_slack_body_names_the_budget_its_money_the_reason_and_the_dashboard() -> None:
    seen: list[httpx.Request] = []
    sink("slack", httpx.Response(200, text="ok"), seen).send(NOTICE)
    body = json.loads(seen[0].content)
    assert body["text"] == (
        ":rotating_light: *CRITICAL* [provider] pod:pod_1 (budget *llama &lt;lora&gt; &amp; co* "
        "(bud_1)): The provider refused to stop the pod &lt;pod-1&gt; &amp; it is still billing."
    )
    head, money, link, context = body["blocks"]
    assert head["text"]["text"] == (
        ":rotating_light: *CRITICAL* · budget *llama &lt;lora&gt; &amp; co* (bud_1)\n"
        "The provider refused to stop the pod &lt;pod-1&gt; &amp; it is still billing."
    )
    assert [f["text"] for f in money["fields"]] == [
        "*Spent*\n$4,195.50",
        "*Ceiling*\n$4,200.00",
        "*Remaining*\nnone: $12.35 over",
        "*Committed*\n$4,212.35 committed (spent $4,195.50 + shutdown $2.35 + storage tail "
        "$4.50 + reserve $10.00)",
    ]
    assert link["text"]["text"] == (
        "<https://governor.example.test/status/budgets/bud_1|Open the dashboard>"
    )
    assert context["elements"][0]["text"] == (
        "provider · pod:pod_1 · event 42 · 2026-01-01 12:00:00 UTC"
    )


def test_a_slack_notice_without_budget_or_public_url_has_no_money_and_no_link() -> None:
    seen: list[httpx.Request] = []
    sink("slack", httpx.Response(200, text="ok"), seen, public_url=None).send(BARE)
    body = json.loads(seen[0].content)
    assert body["text"].startswith(":rotating_light: *CRITICAL* [provider] pod:pod_1: The")
    assert [b["type"] for b in body["blocks"]] == ["section", "context"]
    assert "dashboard" not in json.dumps(body)


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        (httpx.Response(500), Outcome.RETRYABLE),
        (httpx.Response(503), Outcome.RETRYABLE),
        (httpx.Response(429), Outcome.RETRYABLE),
        (httpx.Response(408), Outcome.RETRYABLE),
        (httpx.ConnectError("refused"), Outcome.RETRYABLE),
        (httpx.ReadTimeout("slow"), Outcome.RETRYABLE),
        (httpx.Response(404), Outcome.PERMANENT),
        (httpx.Response(400), Outcome.PERMANENT),
        (httpx.Response(403), Outcome.PERMANENT),
    ],
)
def test_which_failures_are_worth_retrying(
    answer: httpx.Response | Exception, outcome: Outcome
) -> None:
    assert sink("json", answer, []).send(NOTICE).outcome is outcome


def test_its_name_does_not_show_the_secret_path_but_its_place_in_the_list() -> None:
    named = sink("slack", httpx.Response(200), [])
    assert named.name == "slack webhook 1 at https://hooks.example.test"
    named.close()
    client = httpx.Client(transport=httpx.MockTransport(lambda _: httpx.Response(200)))
    third = WebhookSink("https://hooks.example.test/T0/B0/other", "json", client, number=3)
    assert third.name == "json webhook 3 at https://hooks.example.test"
