from __future__ import annotations

from fastapi import APIRouter

from governor.api.deps import Now, Operator, Tx
from governor.api.schemas import TokenIn, TokenOut
from governor.db import repository as repo
from governor.services import tokens

router = APIRouter(tags=["tokens"])


@router.post("/v1/tokens", status_code=201)
def issue(body: TokenIn, _: Operator, tx: Tx, now: Now) -> TokenOut:
    """Create an operator, viewer or agent token (an agent's is bound to one pod, or to one
    machine for a node agent). Shown once."""
    with tx() as session:
        if body.pod_id is not None:
            repo.get_pod(session, body.pod_id)
        token = tokens.issue(
            session, body.role, now, label=body.label, pod_id=body.pod_id, node=body.node
        )
    return TokenOut(
        role=body.role, label=body.label, pod_id=body.pod_id, node=body.node, token=token
    )
