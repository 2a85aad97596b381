"""A limit on request bodies: anything longer is answered 413 before the app sees it.

A declared Content-Length over the limit is refused without reading a byte; a body without
one (chunked) is counted as it arrives and refused at the first byte too many. A body within
the limit is read whole (the app would read it whole anyway) and handed on unchanged.
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from governor.api.errors import error_body


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        body: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            body.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(body), message, receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = f"the request body is larger than this server accepts ({self.max_bytes} bytes)"
        response = JSONResponse(error_body("too_large", message), status_code=413)
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(body: bytes, last: Message, receive: Receive) -> Receive:
    """The body as one message, then the rest of the conversation. A client that left before
    the end of its body is seen to leave there, its body unfinished."""
    left = last["type"] != "http.request"
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": left}]
    if left:
        pending.append(last)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay
