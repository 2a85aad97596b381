"""A request's JSON body, told apart by its content type and bounded before it is parsed: a
body nesting deeper, or with a larger object or array, than `json_bounds` allows is answered
422 with the bound's code (`too_deep`, `too_many_members`), where a parser would otherwise
give up with a RecursionError or spend its time on it."""

from __future__ import annotations

from email.message import Message

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from governor.api.errors import error_body
from governor.services.security.json_bounds import out_of_bounds


def is_json(content_type: str | None) -> bool:
    """Whether `content_type` says JSON, as FastAPI reads it: application/json or */*+json."""
    if not content_type:
        return False
    message = Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


async def refusal(request: Request) -> Response | None:
    """A 422 for a JSON body out of bounds; None for any other."""
    if not is_json(request.headers.get("content-type")):
        return None
    exceeded = out_of_bounds(await request.body())
    if exceeded is None:
        return None
    details = [{"field": "body", "problem": exceeded.message}]
    return JSONResponse(error_body(exceeded.code, exceeded.message, details=details), 422)
