"""A refused role says which token it needs, in English."""

from __future__ import annotations

import pytest

from governor.domain.errors import Forbidden
from governor.domain.model import Role
from governor.services.security.tokens import Principal


@pytest.mark.parametrize(
    ("role", "needed", "message"),
    [
        (
            Role.JOB,
            (Role.OPERATOR, Role.VIEWER),
            "this needs an operator or viewer token; yours is a job token",
        ),
        (Role.AGENT, (Role.VIEWER,), "this needs a viewer token; yours is an agent token"),
        (Role.VIEWER, (Role.OPERATOR,), "this needs an operator token; yours is a viewer token"),
    ],
)
def test_a_refused_role_is_named_with_its_article(
    role: Role, needed: tuple[Role, ...], message: str
) -> None:
    with pytest.raises(Forbidden) as refused:
        Principal(role).require(*needed)
    assert refused.value.message == message
