"""A webhook sink: one POST per notice through an injected httpx client.

Retryability: a transport error, a timeout, 408, 425, 429 and any 5xx may succeed later;
any other answer outside 2xx will not. Each POST carries the event id (in the body and as
`Idempotency-Key`) so a receiver can recognise a repeat after a lost answer.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

import httpx

from governor.adapters.notify.formats import json_body, slack_body
from governor.domain.notice import Delivery, Notice, Outcome

RETRYABLE_STATUS = {408, 425, 429}


class Kind(StrEnum):
    JSON = "json"
    SLACK = "slack"


BODY: dict[Kind, Callable[[Notice, str | None], dict[str, Any]]] = {
    Kind.JSON: json_body,
    Kind.SLACK: slack_body,
}


class WebhookSink:
    def __init__(
        self,
        url: str,
        kind: str,
        client: httpx.Client,
        *,
        public_url: str | None = None,
        number: int = 1,
    ) -> None:
        self.url = url
        self.kind = Kind(kind)
        self._client = client
        self._public_url = public_url  # the dashboard's address, for links
        address = httpx.URL(url)
        # Slack-style URLs carry their secret in the path: name the host only, and the
        # webhook's place in the configured list (two may share a host)
        where = f"{address.scheme}://{address.netloc.decode()}"
        self._name = f"{self.kind.value} webhook {number} at {where}"

    @property
    def name(self) -> str:
        return self._name

    def send(self, notice: Notice) -> Delivery:
        headers = {"Idempotency-Key": f"governor-event-{notice.event_id}"}
        try:
            response = self._client.post(
                self.url, json=BODY[self.kind](notice, self._public_url), headers=headers
            )
        except httpx.HTTPError as exc:
            return Delivery(Outcome.RETRYABLE, type(exc).__name__)
        if response.is_success:
            return Delivery(Outcome.DELIVERED)
        detail = f"HTTP {response.status_code}"
        retryable = response.status_code in RETRYABLE_STATUS or response.status_code >= 500
        return Delivery(Outcome.RETRYABLE if retryable else Outcome.PERMANENT, detail)

    def close(self) -> None:
        self._client.close()
