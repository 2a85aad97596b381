"""Fake clouds served over real HTTP on a thread, for tests that point adapters at them.

Timeouts: a call a test expects an answer to has TIMEOUT_S, generous on a busy machine; a
request the fake holds (the canned answer "hold") times out after HELD_TIMEOUT_S, which the
hold guarantees whatever the machine's speed. The clients `Served` makes, and the EC2
adapters it is given, tell the two apart request by request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.httpsession import URLLib3Session

from governor.adapters.providers.aws import Ec2Provider
from governor.fakes.http_cloud import HOLD, FakeCloud

C = TypeVar("C", bound=FakeCloud)
TIMEOUT_S = 30.0
HELD_TIMEOUT_S = 0.5
HELD_BOTO = URLLib3Session(timeout=HELD_TIMEOUT_S)  # boto3's HTTP, for a held request only


@dataclass
class Served(Generic[C]):
    """A running fake cloud and the URL it answers on."""

    fake: C
    url: str
    holds_sent: int = field(default=0, init=False)  # requests sent that the fake is to hold

    def answer_next(self, *answers: str) -> None:
        """Queue canned answers (see governor.fakes.http_cloud), one per coming provider request."""
        response = self.post(f"{self.url}/_fake/answers", json={"answers": list(answers)})
        assert response.status_code == 204

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        """The test's own POST to the fake; a subclass may send it on a client it holds."""
        return httpx.post(url, timeout=TIMEOUT_S, **kwargs)

    def release(self) -> None:
        """Let the held requests be answered normally; returns once the fake has done so."""
        self._await_holds()
        self.fake.release()

    def client(self, **kwargs: Any) -> httpx.Client:
        """A client for an adapter: TIMEOUT_S, and HELD_TIMEOUT_S for a request the fake holds.
        `kwargs` go to httpx.Client (more request hooks run after this one)."""
        hooks = dict(kwargs.pop("event_hooks", {}))
        hooks["request"] = [self._time_held_out, *hooks.get("request", [])]
        return httpx.Client(timeout=TIMEOUT_S, event_hooks=hooks, **kwargs)

    def ec2(self, adapter: Ec2Provider) -> Ec2Provider:
        """`adapter`, its requests that the fake holds sent with HELD_TIMEOUT_S (the rest keep
        the timeout it was made with)."""
        adapter._client.meta.events.register("before-send.ec2", self._send_held_out)
        return adapter

    def _time_held_out(self, request: httpx.Request) -> None:
        if self._holds_next():
            request.extensions["timeout"] = httpx.Timeout(HELD_TIMEOUT_S).as_dict()

    def _send_held_out(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse | None:
        return HELD_BOTO.send(request) if self._holds_next() else None

    def _holds_next(self) -> bool:
        """Whether the fake will hold the request about to be sent (counted if so): a hold
        comes next in its queue, once it holds every request sent to be held before."""
        self._await_holds()
        with self.fake.lock:
            held = self.fake.answers[:1] == [HOLD]
        self.holds_sent += held
        return held

    def _await_holds(self) -> None:
        assert self.fake.held(self.holds_sent, within_s=TIMEOUT_S), (
            f"the fake never held the {self.holds_sent} requests sent to be held"
        )
