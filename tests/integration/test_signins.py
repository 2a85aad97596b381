"""A dashboard session opened through the identity provider, checked again on the clock.

The provider here is the port's stand-in, scripted: each refresh answers what the test says (a
person and their groups, a refusal, or no answer). The protocol itself is tested against a real
provider in tests/e2e/test_oidc_signin.py; this is the governor's side of the re-check: when it
asks, what it keeps, and that one request at a time asks.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pytest

from governor.domain.errors import Unauthenticated, Unavailable
from governor.domain.identity import (
    Authorization,
    DeviceCode,
    GroupGrant,
    Identity,
    Vouched,
)
from governor.domain.model import Role
from governor.services.security import logins, signins
from governor.services.security.signins import SigninConfig
from tests.integration.conftest import Governor

CONFIG = SigninConfig(
    group_map={"admins": GroupGrant(Role.OPERATOR), "finance": GroupGrant(Role.VIEWER)},
    recheck_s=900,
)


def vouched(*groups: str, refresh_token: str = "r1") -> Vouched:
    identity = Identity("https://idp.example.test", "alice", "alice@example.com", groups)
    return Vouched(identity, refresh_token)


class Provider:
    """The port, refresh alone scripted: `answers` in turn, each a Vouched or an error."""

    def __init__(self, *answers: Vouched | Exception) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []  # the refresh token of each refresh
        self.meanwhile: Callable[[], None] | None = None  # run during a refresh

    def refresh(self, refresh_token: str, subject: str) -> Vouched:
        assert subject == "alice"
        self.asked.append(refresh_token)
        if self.meanwhile is not None:
            self.meanwhile()
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def start(self, redirect_uri: str) -> Authorization:
        raise AssertionError("not asked here")

    def finish(self, authorization: Authorization, redirect_uri: str, code: str) -> Vouched:
        raise AssertionError("not asked here")

    def start_device(self) -> DeviceCode:
        raise AssertionError("not asked here")

    def poll_device(self, device_code: str) -> Vouched | None:
        raise AssertionError("not asked here")


def signed_in(gov: Governor) -> str:
    with gov.session() as session:
        return signins.open_page_session(session, vouched("admins"), CONFIG, gov.clock.now())


def check(gov: Governor, provider: Provider, token_id: str) -> None:
    signins.keep_checked(gov.ctx.unit_of_work, provider, CONFIG, token_id, gov.clock.now())


def role(gov: Governor, token_id: str, now: datetime | None = None) -> Role | None:
    with gov.session() as session:
        return logins.role_of(session, token_id, now or gov.clock.now())


def test_a_session_is_checked_again_when_due_with_the_latest_refresh_token(gov: Governor) -> None:
    token_id = signed_in(gov)
    provider = Provider(vouched("admins", refresh_token="r2"), vouched("finance"))

    gov.clock.advance(899)
    check(gov, provider, token_id)
    assert provider.asked == []  # not due yet

    gov.clock.advance(1)
    check(gov, provider, token_id)
    check(gov, provider, token_id)  # checked just now: not asked again
    assert provider.asked == ["r1"]
    assert role(gov, token_id) is Role.OPERATOR

    gov.clock.advance(900)
    check(gov, provider, token_id)  # moved to finance: a viewer from now on
    assert provider.asked == ["r1", "r2"]
    assert role(gov, token_id) is Role.VIEWER


def test_a_provider_that_does_not_answer_keeps_the_session_and_is_asked_again(
    gov: Governor,
) -> None:
    token_id = signed_in(gov)
    provider = Provider(Unavailable("the identity provider did not answer"), vouched("admins"))
    gov.clock.advance(900)

    with pytest.raises(Unavailable):
        check(gov, provider, token_id)
    assert role(gov, token_id) is Role.OPERATOR  # not ended

    check(gov, provider, token_id)  # the next request asks again, and goes on
    assert provider.asked == ["r1", "r1"]
    assert role(gov, token_id) is Role.OPERATOR


@pytest.mark.parametrize(
    "answer",
    [vouched("everyone"), Unauthenticated("the identity provider refused (invalid_grant)")],
    ids=["removed from the group", "refused"],
)
def test_a_person_the_provider_no_longer_vouches_for_is_signed_out(
    gov: Governor, answer: Vouched | Exception
) -> None:
    token_id = signed_in(gov)
    gov.clock.advance(900)

    check(gov, Provider(answer), token_id)

    assert role(gov, token_id) is None  # its token revoked: every replica refuses it


def test_one_request_at_a_time_asks(gov: Governor) -> None:
    token_id = signed_in(gov)
    provider = Provider(vouched("admins"))
    provider.meanwhile = lambda: check(gov, provider, token_id)  # another request, meanwhile
    gov.clock.advance(900)

    check(gov, provider, token_id)

    assert provider.asked == ["r1"]
    assert role(gov, token_id) is Role.OPERATOR


def test_a_session_ends_with_its_lifetime(gov: Governor) -> None:
    token_id = signed_in(gov)
    assert role(gov, token_id) is Role.OPERATOR
    gov.clock.advance(CONFIG.session_s)
    assert role(gov, token_id) is None
