from __future__ import annotations

from fastapi import APIRouter

from governor.api.deps import Now, Operator, Tx
from governor.api.schemas import TokenIn, TokenOut
from governor.services import tokens

router = APIRouter(tags=["tokens"])


@router.post("/v1/tokens", status_code=201)
def issue(body: TokenIn, _: Operator, tx: Tx, now: Now) -> TokenOut:
    """Create an operator or viewer token. It is shown once."""
    with tx() as session:
        token = tokens.issue(session, body.role, now, label=body.label)
    return TokenOut(role=body.role, label=body.label, token=token)
