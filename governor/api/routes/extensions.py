from __future__ import annotations

from typing import Annotated

from fastapi import Query

from governor.api.deps import Context, Decider, ExtensionWriter, Now, Paging, Tx, Viewer
from governor.api.error_responses import errors
from governor.api.route import api_router
from governor.api.schemas import DecisionIn, ExtensionIn, ExtensionOut, page_of
from governor.domain.model import ExtensionState, Requester, Role
from governor.domain.paging import Page
from governor.services.jobs import checkins
from governor.services.money import extension_model
from governor.services.money.extension_model import Extension
from governor.services.security.tokens import Principal

router = api_router(tags=["extensions"])


@router.post(
    "/v1/budgets/{budget_id}/extensions",
    status_code=201,
    response_model=ExtensionOut,
    responses=errors(409),
)
def request(
    budget_id: str, body: ExtensionIn, caller: ExtensionWriter, tx: Tx, now: Now
) -> Extension:
    """Ask for more budget. It stays pending, and changes nothing, until an operator decides."""
    requester = Requester.JOB if caller.role is Role.JOB else Requester.OPERATOR
    with tx() as session:
        checkins.refuse_ended_job(session, caller)
        return extension_model.request(
            session, budget_id, body.amount_usd, body.reason, requester, now, run_id=caller.run_id
        )


@router.get("/v1/extensions", response_model=page_of(ExtensionOut))
def list_extensions(
    caller: Viewer,
    tx: Tx,
    paging: Paging,
    budget_id: str | None = None,
    state: Annotated[ExtensionState | None, Query()] = None,
) -> Page[Extension]:
    """Extension requests, oldest first; narrowed to a budget's, or to one state."""
    with tx.read() as session:
        return extension_model.page(
            session, paging, budget_id=budget_id, state=state, scope=caller.teams
        )


@router.post(
    "/v1/extensions/{extension_id}/approve", response_model=ExtensionOut, responses=errors(409)
)
def approve(
    extension_id: str,
    caller: Decider,
    ctx: Context,
    tx: Tx,
    now: Now,
    body: DecisionIn | None = None,
) -> Extension:
    """Approve a pending request (an operator or an approver): the effective ceiling rises by
    its amount. Once only. Over its team's `org_approval_over_usd`, only an org-wide operator
    or approver may approve it (403 for a team's own)."""
    return _decide(extension_id, True, body, caller, ctx, tx, now)


@router.post(
    "/v1/extensions/{extension_id}/deny", response_model=ExtensionOut, responses=errors(409)
)
def deny(
    extension_id: str,
    caller: Decider,
    ctx: Context,
    tx: Tx,
    now: Now,
    body: DecisionIn | None = None,
) -> Extension:
    """Deny a pending request (an operator or an approver). Once only."""
    return _decide(extension_id, False, body, caller, ctx, tx, now)


def _decide(
    extension_id: str,
    approve: bool,
    body: DecisionIn | None,
    caller: Principal,
    ctx: Context,
    tx: Tx,
    now: Now,
) -> Extension:
    note = body.note if body else None
    with tx() as session:
        return extension_model.decide(
            session, ctx.config, extension_id, approve, note, now, by=caller
        )
