"""The error responses a route declares in the OpenAPI document, each with the one error shape
every error leaves in ({"error": {"code", "message", "details"?}}, see errors.py)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class Problem(BaseModel):
    field: str
    problem: str


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: list[Problem] | None = None  # a 422's fields, each with what is wrong with it


class ErrorOut(BaseModel):
    error: ErrorDetail


WHY = {
    401: "no bearer token, or one unknown, revoked or expired",
    403: "the token's role, or the run, budget, pod or node it is bound to, does not allow this",
    404: "nothing by that id",
    409: "the request clashes with the current state",
    413: "the body is larger than GOVERNOR_MAX_BODY_BYTES",
    415: "the body is not sent as JSON",
    422: "the request, or a field of it, is not valid (each field named in details)",
    429: "too many failed authentications, or too many writes with this token, this minute",
    503: "the database, or the provider, did not answer; try again shortly",
}
_RETRY_AFTER = {
    "Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}},
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The `responses` of a route that can answer each of `statuses` with an error."""
    return {
        status: {
            "model": ErrorOut,
            "description": WHY[status],
            **({"headers": _RETRY_AFTER} if status in (429, 503) else {}),
        }
        for status in sorted(statuses)
    }
