"""Typed dependencies: the service context, transactions, the clock and who is calling."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from governor.db.engine import read_only, unit_of_work
from governor.domain.errors import Unauthenticated
from governor.domain.model import Role
from governor.services.auth_limits import client_address
from governor.services.context import ServiceContext
from governor.services.tokens import Principal

_bearer = HTTPBearer(auto_error=False, description="operator, viewer or job token")


def _context(request: Request) -> ServiceContext:
    context: ServiceContext = request.app.state.context
    return context


Context = Annotated[ServiceContext, Depends(_context)]


class Transaction:
    """`with tx() as session:` opens one unit of work: committed once, or rolled back."""

    def __init__(self, context: ServiceContext) -> None:
        self._context = context

    def __call__(self) -> AbstractContextManager[Session]:
        return unit_of_work(self._context.sessions)

    def read(self) -> AbstractContextManager[Session]:
        """A transaction that only reads: it never waits for a writer, nor makes one wait."""
        return read_only(self._context.sessions)


def _transaction(context: Context) -> Transaction:
    return Transaction(context)


Tx = Annotated[Transaction, Depends(_transaction)]


def _now(context: Context) -> datetime:
    return context.clock.now()


Now = Annotated[datetime, Depends(_now)]


def _principal(
    request: Request,
    context: Context,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The caller, from a bearer token; failed attempts are limited (429 past the limit)."""
    token = credentials.credentials if credentials else None
    address = client_address(
        request.client.host if request.client else None,
        request.headers.get("x-forwarded-for"),
        context.config.trusted_proxies,
    )
    context.auth_failures.check(address, token)
    try:
        return context.tokens.authenticate(context.sessions, token, context.clock.now())
    except Unauthenticated:
        context.auth_failures.failed(address, token)
        raise


Caller = Annotated[Principal, Depends(_principal)]


def _operator(caller: Caller) -> Principal:
    caller.require(Role.OPERATOR)
    return caller


def _viewer(caller: Caller) -> Principal:
    caller.require(Role.OPERATOR, Role.VIEWER)
    return caller


Operator = Annotated[Principal, Depends(_operator)]
Viewer = Annotated[Principal, Depends(_viewer)]
