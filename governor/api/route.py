"""A route of the API: who may call it is settled before its body is read, and its OpenAPI
entry lists every error status it can answer.

FastAPI reads and parses a body before it resolves a route's dependencies, so a caller
without a valid token would learn 422 for malformed JSON before 401. Here the route's Access
dependency runs first; the route then finds the caller kept with the request.

The error statuses follow from what the route is made of: a token (401, 403, 429), a body
(413, 415), an id in its path (404), the service context (503), and a URL (422: a control
character in it, if nothing else). A route adds what only it can answer (409, a 404 for an id
in its body) with `responses=errors(...)`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Iterator, Sequence
from email.message import Message
from typing import Any, ClassVar, get_args
from weakref import WeakKeyDictionary

from fastapi import APIRouter, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_dependant
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

from governor.api.batches import Batches
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
        accesses = _accesses(self.dependant)
        if not accesses:
            return handler

        async def authorised(request: Request) -> Response:
            credentials = await bearer(request)
            for access in accesses:
                await access(request, credentials)
            return await handler(request)

        return authorised


# A LeanRoute's group: its queued requests, as (path value, body), and the service context.
Group = Callable[[Sequence[tuple[str, Any]], Any], Sequence[Response | Exception | None]]
Queue = Batches[tuple[str, Any], Response | None]


class LeanRoute(ApiRoute):
    """The busiest route, served without FastAPI's per-request work when its request is well
    formed: resolving its dependencies and reading its body took a sixth to a third of a
    heartbeat's CPU. Who may call is settled first, as for every route; then a well-formed
    request (the path's one parameter and the body its model takes) is queued, and its
    `group` answers all that have queued in one worker thread (`Batches`): with a Response,
    an exception that the app's handlers answer, or None to have the endpoint answer it.

    The endpoint takes the path's one parameter, the body, the caller and the service
    context, in that order; the caller is declared by a writer dependency (`writer`), which
    is called as declared. FastAPI keeps the route's declaration (its OpenAPI entry) and
    every request that is not well formed: without a JSON content type, with malformed JSON
    or a body its model refuses, a request is handed to FastAPI's own handler, which answers
    it as any route's.
    """

    writer: ClassVar[Any]  # an Annotated[Principal, Depends(...)] of governor.api.deps
    group: ClassVar[Group]
    queues: ClassVar[WeakKeyDictionary[Any, Queue]]  # by app: its requests, queued

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        [access] = _accesses(self.dependant)
        [path_param] = self.dependant.path_params
        [body_param] = self.dependant.body_params
        model: type[BaseModel] = body_param.field_info.annotation
        admit = get_args(self.writer)[1].dependency
        endpoint, group, queues = self.endpoint, type(self).group, type(self).queues

        def batches(app: Any) -> Queue:
            """The app's queue of requests, on the event loop that serves it."""
            queue = queues.get(app)
            if queue is None or queue.loop is not asyncio.get_running_loop():
                context = app.state.context
                queue = queues[app] = Batches(lambda items: group(items, context))
            return queue

        async def lean(request: Request) -> Response:
            caller = await access(request, await bearer(request))
            body = _well_formed(model, request.headers.get("content-type"), await request.body())
            if body is None:
                return await handler(request)  # FastAPI answers: 415 or 422, as ever
            context = request.app.state.context
            caller = await admit(context, caller)
            path_value = request.path_params[path_param.name]
            answer = await batches(request.app).submit((path_value, body))
            if answer is None:
                answer = await run_in_threadpool(endpoint, path_value, body, caller, context)
            return answer

        return lean


def _well_formed(model: type[BaseModel], content_type: str | None, body: bytes) -> Any:
    """The body as `model`, if it is JSON that the model takes; else None."""
    if not content_type or not body:
        return None
    message = Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    if message.get_content_maintype() != "application" or not (
        subtype == "json" or subtype.endswith("+json")
    ):
        return None
    try:
        return model.model_validate(json.loads(body))
    except (ValueError, ValidationError):  # JSONDecodeError and UnicodeDecodeError included
        return None


def lean_route(writer: Any, group: Group) -> type[LeanRoute]:
    """A LeanRoute whose caller is declared by `writer`, its requests answered by `group`."""
    queues: WeakKeyDictionary[Any, Queue] = WeakKeyDictionary()
    members = {"writer": writer, "group": staticmethod(group), "queues": queues}
    return type("LeanRoute", (LeanRoute,), members)


def api_router(**kwargs: Any) -> APIRouter:
    """An APIRouter whose routes are ApiRoutes."""
    return APIRouter(route_class=ApiRoute, **kwargs)


def _calls(dependant: Dependant) -> Iterator[Any]:
    for dependency in dependant.dependencies:
        yield dependency.call
        yield from _calls(dependency)


def _accesses(dependant: Dependant) -> list[Access]:
    """The route's Access dependencies: who may call it."""
    return [call for call in _calls(dependant) if isinstance(call, Access)]


def _statuses(dependant: Dependant) -> set[int]:
    calls = list(_calls(dependant))
    statuses = {422}
    if _accesses(dependant):
        statuses |= {401, 403, 429}
    if dependant.body_params:
        statuses |= {413, 415}
    if any(param.name.endswith("_id") for param in dependant.path_params):
        statuses.add(404)
    if _CONTEXT in calls:
        statuses.add(503)
    return statuses
