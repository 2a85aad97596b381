"""The body limit at the ASGI level: a body is counted chunk by chunk as it streams in, and
refused at the first byte too many, whatever Content-Length said or did not say."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from governor.api.body_limit import BodyLimit

LIMIT = 1000


class App:
    """Reads the whole body as a framework would, and says how much it got."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.disconnected = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.disconnected = True
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def call(
    chunks: list[bytes], headers: tuple[tuple[bytes, bytes], ...] = (), then: str | None = None
) -> tuple[App, list[Message], int]:
    """Send `chunks` (the last one ending the body, unless `then` says what comes next);
    return the app, what was sent back and how many chunks were read."""
    app = App()
    messages: list[Message] = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1 or then is not None}
        for i, c in enumerate(chunks)
    ]
    if then is not None:
        messages.append({"type": then})
    read = 0
    sent: list[Message] = []

    async def receive() -> Message:
        nonlocal read
        read += 1
        return messages[read - 1] if read <= len(messages) else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/", "headers": [*headers]}
    asyncio.run(BodyLimit(app, LIMIT)(scope, receive, send))
    return app, sent, read


def _status(sent: list[Message]) -> int:
    return int(sent[0]["status"])


def test_a_streamed_body_is_refused_at_the_first_byte_too_many() -> None:
    app, sent, read = call([b"x" * 400] * 5)
    assert _status(sent) == 413
    assert json.loads(sent[1]["body"])["error"]["code"] == "too_large"
    assert read == 3, "reading stopped at the chunk that went over"
    assert app.bodies == []


def test_a_declared_length_over_the_limit_is_refused_unread() -> None:
    app, sent, read = call([b"x" * 10], ((b"content-length", b"1001"),))
    assert (_status(sent), read, app.bodies) == (413, 0, [])


def test_a_body_within_the_limit_reaches_the_app_whole() -> None:
    app, sent, _ = call([b"a" * 500, b"b" * 499, b"c"])
    assert _status(sent) == 200
    assert app.bodies == [b"a" * 500 + b"b" * 499 + b"c"]


def test_a_client_that_leaves_mid_body_is_seen_to_leave() -> None:
    app, _, _ = call([b"x" * 10], then="http.disconnect")
    assert app.disconnected and app.bodies == []
