"""Every error leaves as {"error": {"code", "message"}} with the right status; 500 means a bug."""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from governor.domain import errors
from governor.services.context import DatabaseRefused
from governor.services.replica.failure_log import FailureLog
from governor.services.security.windows import Throttled

log = logging.getLogger(__name__)
_told = FailureLog(log)  # a 500's traceback: once a minute for each route and kind of error


class _ToldAlready(logging.Filter):
    """The server's own "Exception in ASGI application" for an error `_bug` answered (Starlette
    raises it again once answered): `_bug` has told it, with its traceback, once a minute."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Exception in ASGI application")


_told_already = _ToldAlready()

STATUS = {
    errors.NotFound: 404,
    errors.Conflict: 409,
    errors.Forbidden: 403,
    errors.Unauthenticated: 401,
    errors.Invalid: 422,
    Throttled: 429,
}


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **extra}}


def _encodable(text: str) -> str:
    """Text a response can carry: a lone surrogate the client sent (in a key) is escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _where(location: tuple[Any, ...]) -> str:
    """The field, without where the request carried it (a field may be called "path")."""
    if location and location[0] in ("body", "query", "path", "header", "cookie"):
        location = location[1:]
    return _encodable(".".join(str(p) for p in location)) or "body"


def problem(error: Any) -> str:
    """A validation error's message as our own validators wrote it: pydantic puts "Value
    error, " before what a validator raised, which tells a reader nothing."""
    message = str(error.get("msg"))
    if error.get("type") == "value_error":
        message = message.removeprefix("Value error, ")
    return message


def _detail(error: Any) -> dict[str, str]:
    if error.get("type") == "json_invalid":
        position = error.get("loc", ("body", "?"))[-1]
        reason = error.get("ctx", {}).get("error", "invalid JSON")
        return {"field": "body", "problem": f"malformed JSON at character {position}: {reason}"}
    return {
        "field": _where(tuple(error.get("loc", ()))),
        "problem": _encodable(problem(error)),
    }


def _validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    content_type = request.headers.get("content-type", "")
    if exc.body is not None and isinstance(exc.body, bytes) and "json" not in content_type:
        message = (
            f"the body must be JSON sent with 'Content-Type: application/json' (got "
            f"{content_type or 'no content type'}); with curl, use --json instead of -d"
        )
        return JSONResponse(error_body("invalid_request", message), status_code=415)
    return _invalid([_detail(e) for e in exc.errors()])


def _invalid(details: list[dict[str, str]]) -> JSONResponse:
    message = "; ".join(f"{d['field']}: {d['problem']}" for d in details)
    return JSONResponse(error_body("invalid_request", message, details=details), status_code=422)


def _governor(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.GovernorError)
    status = next((s for cls, s in STATUS.items() if isinstance(exc, cls)), 400)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, Throttled):
        headers = {"Retry-After": str(math.ceil(exc.retry_after_s))}
    return JSONResponse(error_body(exc.code, exc.message), status_code=status, headers=headers)


def _http(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 400:  # FastAPI could not read the body as text (not UTF-8, say)
        return _invalid([{"field": "body", "problem": f"not JSON text: {exc.__cause__ or exc}"}])
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return JSONResponse(
        error_body(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers
    )


def _unavailable(request: Request, exc: Exception) -> JSONResponse:
    request.app.state.context.writes.say("requests answered 503", exc)
    message = (
        str(exc)
        if isinstance(exc, errors.Unavailable)
        else "the database is not reachable right now; try again shortly"
    )
    return JSONResponse(
        error_body("unavailable", message), status_code=503, headers={"Retry-After": "5"}
    )


def _bug(request: Request, exc: Exception) -> JSONResponse:
    route = getattr(request.scope.get("route"), "path", request.url.path)
    _told.tell(f"unhandled error answering {request.method} {route}", exc, trace=True)
    return JSONResponse(
        error_body("internal_error", "an internal error occurred; it has been logged"),
        status_code=500,
    )


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(errors.GovernorError, _governor)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(errors.Unavailable, _unavailable)
    app.add_exception_handler(DatabaseRefused, _unavailable)
    app.add_exception_handler(Exception, _bug)
    logging.getLogger("uvicorn.error").addFilter(_told_already)  # once, however many apps
