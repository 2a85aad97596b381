from __future__ import annotations

from governor.api.deps import Context, Now, Operator, Paging, Tx
from governor.api.error_responses import errors
from governor.api.route import api_router
from governor.api.schemas import Page, TokenIn, TokenInfo, TokenOut
from governor.db import repository as repo
from governor.domain.errors import Invalid
from governor.services.security import tokens

router = api_router(tags=["tokens"])


@router.post("/v1/tokens", status_code=201, responses=errors(404))
def issue(body: TokenIn, caller: Operator, tx: Tx, now: Now) -> TokenOut:
    """Create an operator, viewer or agent token (an agent's is bound to one pod, or to one
    machine for a node agent), optionally expiring. Shown once."""
    if body.expires_at is not None and body.expires_at <= now:
        raise Invalid(f"expires_at must be in the future (it is now {now:%Y-%m-%dT%H:%M:%SZ})")
    with tx() as session:
        if body.pod_id is not None:
            repo.get_pod(session, body.pod_id)
        token, row = tokens.grant(
            session,
            body.role,
            now,
            by=caller,
            label=body.label,
            pod_id=body.pod_id,
            node=body.node,
            expires_at=body.expires_at,
        )
        return TokenOut(
            id=row.id,
            role=body.role,
            label=body.label,
            pod_id=body.pod_id,
            node=body.node,
            expires_at=body.expires_at,
            token=token,
        )


@router.get("/v1/tokens")
def list_tokens(_: Operator, tx: Tx, paging: Paging) -> Page[TokenInfo]:
    """The tokens on file, newest first, with whom each is for and whether it still works."""
    with tx.read() as session:
        page = tokens.listing(session, paging)
        return Page[TokenInfo].of(page, lambda r: TokenInfo.model_validate(r, from_attributes=True))


@router.post("/v1/tokens/{token_id}/revoke", responses=errors(409))
def revoke(token_id: str, caller: Operator, ctx: Context, tx: Tx, now: Now) -> TokenInfo:
    """End a token now (on every replica within one enforcement interval). The bootstrap
    operator token is rotated instead: `governor token rotate-bootstrap`."""
    with tx() as session:
        row = tokens.revoke(session, token_id, now, by=caller)
        info = TokenInfo.model_validate(row, from_attributes=True)
    ctx.tokens.forget(lambda p: p.token_id == token_id)
    return info
