"""Webhook sinks over an injected transport: the two body shapes, the event id on every POST,
and which answers are worth another attempt."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
import pytest

from governor.adapters.notify.webhook import WebhookSink
from governor.domain.model import Category, Severity
from governor.domain.notice import Notice, Outcome

NOTICE = Notice(
    event_id=42,
    at=datetime(2026, 1, 1, 12, tzinfo=UTC),
    severity=Severity.CRITICAL,
    category=Category.PROVIDER,
    subject="pod:pod_1",
    message="The provider refused to stop the pod <pod-1> & it is still billing.",
    budget_id="bud_1",
    evidence={"attempts": 3},
)


def sink(kind: str, answer: httpx.Response | Exception, seen: list[httpx.Request]) -> WebhookSink:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if isinstance(answer, Exception):
            raise answer
        return answer

    client = httpx.Client(transport=httpx.MockTransport(handle))
    return WebhookSink("https://hooks.example.test/services/T0/B0/secret", kind, client)


def test_the_json_body_is_the_event_with_its_id() -> None:
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
    }


def test_the_slack_body_is_one_escaped_line_of_text() -> None:
    seen: list[httpx.Request] = []
    sink("slack", httpx.Response(200, text="ok"), seen).send(NOTICE)
    body = json.loads(seen[0].content)
    assert body["text"] == (
        ":rotating_light: *CRITICAL* [provider] pod:pod_1 (budget bud_1): The provider refused "
        "to stop the pod &lt;pod-1&gt; &amp; it is still billing."
    )


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


def test_its_name_does_not_show_the_secret_path() -> None:
    named = sink("slack", httpx.Response(200), [])
    assert named.name == "slack webhook at https://hooks.example.test"
    named.close()
