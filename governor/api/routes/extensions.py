from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from governor.api import views
from governor.api.deps import Caller, Context, Now, Operator, Tx, Viewer
from governor.api.schemas import DecisionIn, ExtensionIn, ExtensionOut
from governor.db import repository as repo
from governor.domain.model import ExtensionState, Requester, Role
from governor.services import checkins, extensions

router = APIRouter(tags=["extensions"])


@router.post("/v1/budgets/{budget_id}/extensions", status_code=201)
def request(budget_id: str, body: ExtensionIn, caller: Caller, tx: Tx, now: Now) -> ExtensionOut:
    """Ask for more budget. It stays pending, and changes nothing, until an operator decides."""
    caller.require_budget(budget_id)
    requester = Requester.JOB if caller.role is Role.JOB else Requester.OPERATOR
    with tx() as session:
        checkins.refuse_ended_job(session, caller)
        row = extensions.request(
            session, budget_id, body.amount_usd, body.reason, requester, now, run_id=caller.run_id
        )
        return views.extension(row)


@router.get("/v1/extensions")
def list_extensions(
    _: Viewer,
    tx: Tx,
    budget_id: str | None = None,
    state: Annotated[ExtensionState | None, Query()] = None,
) -> list[ExtensionOut]:
    with tx.read() as session:
        return [
            views.extension(r) for r in repo.extensions(session, budget_id=budget_id, state=state)
        ]


@router.post("/v1/extensions/{extension_id}/approve")
def approve(
    extension_id: str, _: Operator, ctx: Context, tx: Tx, now: Now, body: DecisionIn | None = None
) -> ExtensionOut:
    """Approve a pending request: the effective ceiling rises by its amount. Once only."""
    return _decide(extension_id, True, body, ctx, tx, now)


@router.post("/v1/extensions/{extension_id}/deny")
def deny(
    extension_id: str, _: Operator, ctx: Context, tx: Tx, now: Now, body: DecisionIn | None = None
) -> ExtensionOut:
    """Deny a pending request. Once only."""
    return _decide(extension_id, False, body, ctx, tx, now)


def _decide(
    extension_id: str, approve: bool, body: DecisionIn | None, ctx: Context, tx: Tx, now: Now
) -> ExtensionOut:
    note = body.note if body else None
    with tx() as session:
        return views.extension(
            extensions.decide(session, ctx.config, extension_id, approve, note, now)
        )
