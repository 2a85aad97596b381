from __future__ import annotations

from governor.api.deps import Context, Now, Operator, Paging, Tx
from governor.api.error_responses import errors
from governor.api.route import api_router
from governor.api.schemas import TokenIn, TokenInfo, TokenOut, page_of
from governor.domain.errors import Invalid
from governor.domain.paging import Page
from governor.services.security import token_model
from governor.services.security.token_model import IssuedToken

router = api_router(tags=["tokens"])


@router.post("/v1/tokens", status_code=201, response_model=TokenOut, responses=errors(404))
def issue(body: TokenIn, caller: Operator, tx: Tx, now: Now) -> IssuedToken:
    """Create an operator, approver, viewer or agent token (an agent's is bound to one pod, or
    to one machine for a node agent), optionally expiring, an operator's, approver's or
    viewer's for named teams or for every team. Shown once."""
    if body.expires_at is not None and body.expires_at <= now:
        raise Invalid(f"expires_at must be in the future (it is now {now:%Y-%m-%dT%H:%M:%SZ})")
    with tx() as session:
        return token_model.grant(
            session,
            body.role,
            now,
            by=caller,
            label=body.label,
            pod_id=body.pod_id,
            node=body.node,
            expires_at=body.expires_at,
            teams=body.teams,
        )


@router.get("/v1/tokens", response_model=page_of(TokenInfo))
def list_tokens(caller: Operator, tx: Tx, paging: Paging) -> Page[token_model.TokenInfo]:
    """The tokens on file, newest first, with whom each is for and whether it still works; a
    team's operator sees its teams' tokens and its runs' and pods' alone."""
    with tx.read() as session:
        return token_model.page(session, paging, caller.teams)


@router.post("/v1/tokens/{token_id}/revoke", response_model=TokenInfo, responses=errors(409))
def revoke(
    token_id: str, caller: Operator, ctx: Context, tx: Tx, now: Now
) -> token_model.TokenInfo:
    """End a token now (on every replica within one enforcement interval). The bootstrap
    operator token is rotated instead: `governor token rotate-bootstrap`."""
    with tx() as session:
        info = token_model.revoke(session, token_id, now, by=caller)
    ctx.tokens.forget(lambda p: p.token_id == token_id)
    return info
