"""Typed dependencies: the service context, transactions, the clock and who is calling."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from governor.domain.model import Role
from governor.domain.paging import DEFAULT_LIMIT, MAX_CURSOR_CHARS, MAX_LIMIT, PageRequest
from governor.services.context import DatabaseRefused, ServiceContext, Session
from governor.services.security import logins, scopes, signins
from governor.services.security.page_sessions import COOKIE, Keys
from governor.services.security.tokens import Principal
from governor.services.security.write_limits import WriteKind

API = "api"  # the writer the API's writes are told as
bearer = HTTPBearer(auto_error=False, description="operator, approver, viewer, job or agent token")


async def _context(request: Request) -> ServiceContext:
    context: ServiceContext = request.app.state.context
    return context


Context = Annotated[ServiceContext, Depends(_context)]


class Transaction:
    """`with tx() as session:` opens one unit of work: committed once, or rolled back."""

    def __init__(self, context: ServiceContext) -> None:
        self._context = context

    @contextmanager
    def __call__(self) -> Iterator[Session]:
        with self.watched(), self._context.unit_of_work() as session:
            yield session

    def watched(self) -> AbstractContextManager[None]:
        """Around a service call that opens its own units of work (the heartbeat's): if the
        database refuses, readiness says so at once; a commit that wrote ends an outage."""
        return self._context.writes.watching(API, self._context.clock)

    def refused(self, refused: DatabaseRefused) -> None:
        """Readiness hears of a write the database refused (one not raised: a group's)."""
        self._context.writes.failed(API, refused, self._context.clock.now())

    def read(self) -> AbstractContextManager[Session]:
        """A transaction that only reads: it never waits for a writer, nor makes one wait."""
        return self._context.read_only()


async def _transaction(context: Context) -> Transaction:
    return Transaction(context)


Tx = Annotated[Transaction, Depends(_transaction)]


async def _now(context: Context) -> datetime:
    return context.clock.now()


Now = Annotated[datetime, Depends(_now)]


def _page_request(
    limit: Annotated[
        int, Query(ge=1, le=MAX_LIMIT, description=f"items per page, at most {MAX_LIMIT}")
    ] = DEFAULT_LIMIT,
    cursor: Annotated[
        str | None,
        Query(
            max_length=MAX_CURSOR_CHARS,
            pattern=r"^[A-Za-z0-9_-]+$",
            description="the `next_cursor` of the page before; left out, the first page",
        ),
    ] = None,
) -> PageRequest:
    return PageRequest(limit, cursor)


Paging = Annotated[PageRequest, Depends(_page_request)]


_BOUND: dict[str, Callable[[Principal, str], None]] = {
    "run_id": Principal.require_run,
    "budget_id": Principal.require_budget,
    "pod_id": Principal.require_pod,
    "node": Principal.require_node,
}


class Access:
    """A dependency: the caller, if its token is one of `roles`; with `own`, a job or agent
    token only for the run, budget, pod or node that path parameter names; with `page`, a
    request without a bearer token may be a signed-in browser's: the dashboard's session
    cookie stands for its token (for a page a browser opens from the dashboard); with `org`
    (what the route does, in words), only an org-wide token: a team's is 403.

    A caller scoped to some teams reaches only their objects: a path naming another team's
    budget, pod, run, extension or token is 404 (`scopes.require_seen`, one statement, asked
    of team-scoped callers alone: a job's or agent's token, and an org-wide one, skip it). A
    query filtering by a budget or pod (`?budget_id=`) there is none of, or of another team,
    is 404 for every caller, worded alike (`scopes.require_filters_seen`).

    Every route's Access is also called before the route reads its body (route.py), so that a
    caller without the right token learns 401, 403 or 404 whatever the body: the caller is
    then kept with the request, and a failed attempt is counted once."""

    def __init__(
        self, *roles: Role, own: str | None = None, page: bool = False, org: str | None = None
    ) -> None:
        assert own is None or own in _BOUND, own
        self.roles, self.own, self.page, self.org = roles, own, page, org

    async def __call__(
        self,
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> Principal:
        caller: Principal | None = getattr(request.state, "caller", None)
        if caller is None and self.page and credentials is None:
            caller = await _signed_in(request)
        if caller is None:
            caller = await _authenticate(request, credentials.credentials if credentials else None)
        request.state.caller = caller
        caller.require(*self.roles)
        if self.org is not None:
            caller.require_org_wide(self.org)
        if self.own is not None:
            _BOUND[self.own](caller, request.path_params[self.own])
        if caller.team_ids is not None and not getattr(request.state, "in_scope", False):
            await _in_scope(request, caller)
            request.state.in_scope = True
        if not getattr(request.state, "filters_seen", False):
            await _filters_seen(request, caller)
            request.state.filters_seen = True
        return caller


async def _in_scope(request: Request, caller: Principal) -> None:
    """NotFound if the path names an object of a team the caller is not scoped to."""
    named = {k: v for k, v in request.path_params.items() if k in scopes.SCOPED}
    if not named:
        return
    context: ServiceContext = request.app.state.context

    def look_up() -> None:
        with context.read_only() as session:
            scopes.require_seen(session, caller, named)

    await run_in_threadpool(look_up)


async def _filters_seen(request: Request, caller: Principal) -> None:
    """NotFound if a query parameter filters by an object there is none of, or of a team the
    caller is not scoped to (`scopes.require_filters_seen`): asked only of a request that has
    such a filter."""
    named = {k: v for k, v in request.query_params.items() if k in scopes.FILTERS}
    if not named:
        return
    context: ServiceContext = request.app.state.context

    def look_up() -> None:
        with context.read_only() as session:
            scopes.require_filters_seen(session, caller, named)

    await run_in_threadpool(look_up)


async def _authenticate(request: Request, token: str | None) -> Principal:
    """The caller, from a bearer token (`callers.identify`): a token the cache remembers costs
    no thread hop and meets no limit; any other is looked up in a worker thread, off the event
    loop, under its client address's limits (429 past them)."""
    context: ServiceContext = request.app.state.context
    peer = request.client.host if request.client else None
    return await context.caller(
        token, peer, request.headers.get("x-forwarded-for"), run_in_threadpool
    )


async def _signed_in(request: Request) -> Principal | None:
    """The caller a genuine, unexpired session cookie of the dashboard names, if its token is
    still in force for the page; None: no such cookie (the bearer token decides)."""
    context: ServiceContext = request.app.state.context
    keys: Keys = request.app.state.web_keys
    now = context.clock.now()
    found = keys.read(request.cookies.get(COOKIE), now)
    if found is None:
        return None
    _, token_id, _ = found

    def look_up() -> Principal | None:
        signins.keep_checked(context.unit_of_work, context.identity, context.signin, token_id, now)
        with context.read_only() as session:
            return logins.page_caller(session, token_id, now)

    return await run_in_threadpool(look_up)


READERS = (Role.OPERATOR, Role.APPROVER, Role.VIEWER)
Operator = Annotated[Principal, Depends(Access(Role.OPERATOR))]
# an org-wide operator: what reaches every team (making one)
OrgOperator = Annotated[Principal, Depends(Access(Role.OPERATOR, org="making a team"))]
# who may decide an extension request: an operator, or an approver (who decides nothing else)
Decider = Annotated[Principal, Depends(Access(Role.OPERATOR, Role.APPROVER))]
# a team's ceiling is the organisation's word: declared by an org-wide operator, raised by an
# org-wide operator or approver
CeilingSetter = Annotated[
    Principal, Depends(Access(Role.OPERATOR, org="declaring a team's ceiling"))
]
CeilingDecider = Annotated[
    Principal,
    Depends(Access(Role.OPERATOR, Role.APPROVER, org="deciding a team's ceiling extension")),
]
Viewer = Annotated[Principal, Depends(Access(*READERS))]
# a viewer, or a browser signed in to the dashboard (the report a page links to)
PageViewer = Annotated[Principal, Depends(Access(*READERS, page=True))]
JobOfBudget = Annotated[Principal, Depends(Access(Role.OPERATOR, Role.JOB, own="budget_id"))]
AgentOfPod = Annotated[Principal, Depends(Access(Role.OPERATOR, Role.AGENT, own="pod_id"))]
AgentOfNode = Annotated[Principal, Depends(Access(Role.OPERATOR, Role.AGENT, own="node"))]


def _writer(kind: WriteKind, access: Access) -> Any:
    """A caller whose write of `kind` is counted against its token's limit (429 past it)."""

    # A default, not Annotated: a postponed annotation cannot name the local `access`.
    async def admit(context: Context, caller: Principal = Depends(access)) -> Principal:  # noqa: B008
        context.write_limits.admit(kind, caller.token_id)
        return caller

    return Depends(admit)


_JOB_OF_RUN = Access(Role.OPERATOR, Role.JOB, own="run_id")
HeartbeatWriter = Annotated[Principal, _writer(WriteKind.HEARTBEAT, _JOB_OF_RUN)]
EventWriter = Annotated[Principal, _writer(WriteKind.EVENT, _JOB_OF_RUN)]
ExtensionWriter = Annotated[
    Principal, _writer(WriteKind.EXTENSION, Access(Role.OPERATOR, Role.JOB, own="budget_id"))
]


async def gate_caller(request: Request, token: str) -> Principal:
    """The caller of a launch gate, from the gate token in the URL's path (the launchers send
    no Authorization header); counted by the failed-authentication limits like a bearer."""
    caller = await _authenticate(request, token)
    caller.require(Role.GATE)
    return caller
