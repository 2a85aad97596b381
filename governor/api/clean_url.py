"""A URL whose path or query carries a control character is answered 422 before any route
sees it: an id or a filter with a NUL in it would otherwise reach PostgreSQL, which refuses it.
"""

from __future__ import annotations

from urllib.parse import unquote_plus

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from governor.api.errors import error_body
from governor.services.security.safe_input import bad_character


class CleanUrl:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            query = unquote_plus(scope["query_string"].decode("latin-1"))
            for part, text in (("path", scope["path"]), ("query", query)):
                if (problem := bad_character(text)) is not None:
                    message = f"the URL's {part} {problem}"
                    response = JSONResponse(error_body("invalid_request", message), 422)
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)
