"""A route of the API: who may call it is settled before its body is read, a JSON body is
bounded before it is parsed (`json_body`), and its OpenAPI entry lists every error status it
can answer.

FastAPI reads and parses a body before it resolves a route's dependencies, so a caller
without a valid token would learn 422 for malformed JSON before 401. Here the route's Access
dependency runs first; the route then finds the caller kept with the request.

The error statuses follow from what the route is made of: a token (401, 403, 429), a body
(413, 415), an id in its path or its query (404), the service context (503), and a URL (422:
a control character in it, if nothing else). A route adds what only it can answer (409, a 404
for an id in its body) with `responses=errors(...)`.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator
from typing import Any, get_args

from fastapi import APIRouter, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_dependant
from fastapi.routing import APIRoute

from governor.api import json_body
from governor.api.deps import Access, Context, bearer
from governor.api.error_responses import errors

_CONTEXT = get_args(Context)[1].dependency


class ApiRoute(APIRoute):
    def __init__(
        self,
        path: str,
        endpoint: Callable[..., Any],
        *,
        responses: dict[int | str, dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        derived = errors(*_statuses(get_dependant(path=path, call=endpoint)))
        super().__init__(path, endpoint, responses={**derived, **(responses or {})}, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        callers = accesses(self.dependant)
        takes_body = bool(self.dependant.body_params)
        if not callers and not takes_body:
            return handler

        async def authorised(request: Request) -> Response:
            if callers:
                credentials = await bearer(request)
                for access in callers:
                    await access(request, credentials)
            if takes_body and (refused := await json_body.refusal(request)) is not None:
                return refused
            return await handler(request)

        return authorised


def api_router(**kwargs: Any) -> APIRouter:
    """An APIRouter whose routes are ApiRoutes."""
    return APIRouter(route_class=ApiRoute, **kwargs)


def _calls(dependant: Dependant) -> Iterator[Any]:
    for dependency in dependant.dependencies:
        yield dependency.call
        yield from _calls(dependency)


def accesses(dependant: Dependant) -> list[Access]:
    """The route's Access dependencies: who may call it."""
    return [call for call in _calls(dependant) if isinstance(call, Access)]


def _statuses(dependant: Dependant) -> set[int]:
    calls = list(_calls(dependant))
    statuses = {422}
    if accesses(dependant):
        statuses |= {401, 403, 429}
    if dependant.body_params:
        statuses |= {413, 415}
    if any(p.name.endswith("_id") for p in dependant.path_params + dependant.query_params):
        statuses.add(404)  # an id in the path, or a filter (`?budget_id=`) naming none seen
    if _CONTEXT in calls:
        statuses.add(503)
    return statuses
