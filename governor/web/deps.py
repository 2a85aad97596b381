"""The page's dependencies: context, clock, unit of work, its kit, who is signed in, the form."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated
from urllib.parse import parse_qsl

from fastapi import Depends, Request
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException

from governor.domain.errors import Unavailable
from governor.services.context import ServiceContext, Session
from governor.services.security import logins, signins
from governor.services.security.page_sessions import COOKIE, Keys, PageSession

MAX_FORM_BYTES = 4096


@dataclass(frozen=True)
class Kit:
    """What the page's routes share for the life of the app: its keys and its templates."""

    keys: Keys
    templates: Jinja2Templates


def _context(request: Request) -> ServiceContext:
    context: ServiceContext = request.app.state.context
    return context


Context = Annotated[ServiceContext, Depends(_context)]


def _now(context: Context) -> datetime:
    return context.clock.now()


Now = Annotated[datetime, Depends(_now)]


def _transaction(context: Context) -> Callable[[], AbstractContextManager[Session]]:
    """`with tx() as session:` opens one unit of work: committed once, or rolled back."""
    return context.unit_of_work


Tx = Annotated[Callable[[], AbstractContextManager[Session]], Depends(_transaction)]


def _kit(request: Request) -> Kit:
    kit: Kit = request.state.web_kit
    return kit


WebKit = Annotated[Kit, Depends(_kit)]


def _page_session(request: Request, kit: WebKit, context: Context, now: Now) -> PageSession | None:
    found = kit.keys.read(request.cookies.get(COOKIE), now)
    if found is None:
        return None
    session_id, token_id, expires_at = found
    try:  # a session opened through the identity provider, checked with it again when due
        signins.keep_checked(context.unit_of_work, context.identity, context.signin, token_id, now)
    except Unavailable as exc:
        raise HTTPException(
            503, f"{exc.message}: your session is kept; try again shortly"
        ) from None
    with context.unit_of_work() as session:
        role = logins.role_of(session, token_id, now)
        person = None if role is None else logins.person_of(session, token_id)
    if role is None:
        return None
    csrf = kit.keys.csrf(session_id)
    return PageSession(session_id, token_id, expires_at, role, csrf, person)


SignedIn = Annotated[PageSession | None, Depends(_page_session)]


async def _form(request: Request) -> dict[str, str]:
    """An application/x-www-form-urlencoded body (no multipart: these forms carry no files)."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise HTTPException(413, f"a form may carry at most {MAX_FORM_BYTES} bytes")
    return dict(parse_qsl(body.decode(errors="replace"), keep_blank_values=True))


Form = Annotated[dict[str, str], Depends(_form)]
