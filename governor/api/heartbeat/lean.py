"""The heartbeat's lean route: a well-formed beat is answered without FastAPI's per-request
work, queued with the others that arrive meanwhile and answered in groups (`Batches`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, ClassVar, get_args
from weakref import WeakKeyDictionary

from fastapi import Request, Response
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

from governor.api.deps import bearer
from governor.api.heartbeat.batches import Batches
from governor.api.json_body import is_json
from governor.api.route import ApiRoute, accesses
from governor.services.security.json_bounds import out_of_bounds

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
    every request that is not well formed: without a JSON content type, with a body out of
    bounds (`json_body`), malformed JSON or a body its model refuses, a request is handed to
    the route's own handler, which answers it as any route's.
    """

    writer: ClassVar[Any]  # an Annotated[Principal, Depends(...)] of governor.api.deps
    group: ClassVar[Group]
    queues: ClassVar[WeakKeyDictionary[Any, Queue]]  # by app: its requests, queued

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        [access] = accesses(self.dependant)
        [path_param] = self.dependant.path_params
        [body_param] = self.dependant.body_params
        model = body_param.field_info.annotation
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"a lean route's body is a pydantic model, not {model!r}")
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
            if answer is None:  # the group left it to the endpoint
                return await run_in_threadpool(endpoint, path_value, body, caller, context)
            return answer

        return lean


def _well_formed(model: type[BaseModel], content_type: str | None, body: bytes) -> Any:
    """The body as `model`, if it is JSON within bounds that the model takes; else None."""
    if not body or not is_json(content_type) or out_of_bounds(body) is not None:
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
