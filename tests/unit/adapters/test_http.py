"""The provider HTTP helper over an injected transport: which failures are worth a retry,
how long a 429 asks to wait, and that no key survives into an error."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from governor.adapters.providers._http import ProviderHttp, redact, retry_after_s
from governor.domain.ports import ProviderError

KEY = "rpa_SECRETKEY123"
URL = "https://api.example.test/graphql"


def helper(answer: httpx.Response | Exception) -> ProviderHttp:
    def handle(request: httpx.Request) -> httpx.Response:
        if isinstance(answer, Exception):
            raise answer
        return answer

    client = httpx.Client(transport=httpx.MockTransport(handle))
    return ProviderHttp(client, "acme", KEY, {"Authorization": f"Bearer {KEY}"})


def failure(answer: httpx.Response | Exception) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        helper(answer).request("POST", URL, json={})
    return caught.value


def test_a_json_answer_comes_back_decoded() -> None:
    assert helper(httpx.Response(200, json={"data": 1})).request("GET", URL) == {"data": 1}


def test_no_content_decodes_to_none() -> None:
    assert helper(httpx.Response(204)).request("DELETE", URL) is None


def test_the_credentials_go_with_every_call() -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    client = httpx.Client(transport=httpx.MockTransport(handle))
    http = ProviderHttp(client, "acme", KEY, {"Authorization": f"Bearer {KEY}"})
    http.request("PUT", URL, json={"state": "stopped"}, params={"owner": "me"})
    assert seen[0].headers["Authorization"] == f"Bearer {KEY}"
    assert seen[0].url.params["owner"] == "me" and seen[0].method == "PUT"


@pytest.mark.parametrize(
    ("answer", "retryable"),
    [
        (httpx.Response(500, text="boom"), True),
        (httpx.Response(503), True),
        (httpx.Response(429), True),
        (httpx.Response(400, text="bad query"), False),
        (httpx.Response(401), False),
        (httpx.Response(404), False),
        (httpx.Response(200, text="<html>gateway</html>"), True),
        (httpx.ConnectError("refused"), True),
        (httpx.ReadTimeout("slow"), True),
        (httpx.ConnectTimeout("slow"), True),
    ],
)
def test_classification(answer: httpx.Response | Exception, retryable: bool) -> None:
    error = failure(answer)
    assert error.retryable is retryable
    assert str(error).startswith("acme ")
    refused = isinstance(answer, httpx.Response) and answer.status_code >= 400
    assert error.status == (answer.status_code if refused else None)


def test_429_carries_the_retry_after_delay() -> None:
    error = failure(httpx.Response(429, headers={"Retry-After": "7"}))
    assert error.retryable and error.retry_after_s == 7.0
    assert "retry after 7 s" in str(error)
    assert failure(httpx.Response(429)).retry_after_s is None


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert retry_after_s("12", now) == 12.0
    assert retry_after_s("Thu, 01 Jan 2026 12:00:30 GMT", now) == 30.0
    assert retry_after_s("Thu, 01 Jan 2026 11:00:00 GMT", now) == 0.0
    assert retry_after_s("soon", now) is None
    assert retry_after_s(None, now) is None


def test_redact_masks_the_key_bearer_tokens_and_api_key_parameters() -> None:
    text = f"key {KEY} header Authorization: Bearer other-token url ?api_key=third&x=1"
    masked = redact(text, KEY)
    for secret in (KEY, "other-token", "third"):
        assert secret not in masked
    assert "x=1" in masked


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(401, text=f"invalid key {KEY}"),
        httpx.Response(500, text=f"Authorization: Bearer {KEY}"),
        httpx.Response(429, text=f"slow down {KEY}"),
        httpx.Response(200, text=f"<html>{KEY}</html>"),
        httpx.ConnectError(f"cannot reach {URL}?api_key={KEY}"),
    ],
)
def test_no_error_text_carries_the_key(answer: Any) -> None:
    error = failure(answer)
    assert KEY not in str(error) and KEY not in repr(error.args)
