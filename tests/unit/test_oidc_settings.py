"""GOVERNOR_OIDC_*: sign-in through an identity provider is configured whole or not at all,
its group map is JSON naming a person's role and teams, and its intervals hold the bounds the
sign-in promises (a re-check at least every 15 minutes, a command-line token within the hour)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from governor.bootstrap import signin_config
from governor.domain.identity import GroupGrant
from governor.domain.model import Role
from governor.settings import load_settings

ISSUER = "https://login.example.test/realms/lab"
GROUPS = {"ml-platform-admins": {"role": "operator"}, "team-a": {"role": "viewer", "teams": ["a"]}}


def configured(**more: object) -> dict[str, object]:
    return {
        "oidc_issuer": ISSUER,
        "oidc_client_id": "governor",
        "oidc_group_roles": json.dumps(GROUPS),
        **more,
    }


def test_unset_means_no_sign_in_through_a_provider() -> None:
    assert signin_config(load_settings()) is None


def test_the_group_map_is_read_from_json() -> None:
    config = signin_config(load_settings(**configured(oidc_recheck_s=60)))
    assert config is not None
    assert config.group_map == {
        "ml-platform-admins": GroupGrant(Role.OPERATOR),
        "team-a": GroupGrant(Role.VIEWER, ("a",)),
    }
    assert (config.recheck_s, config.cli_token_s) == (60, 3600)


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"oidc_client_id": None}, "GOVERNOR_OIDC_CLIENT_ID"),
        ({"oidc_group_roles": "{}"}, "GOVERNOR_OIDC_GROUP_ROLES"),
        ({"oidc_scopes": "email groups"}, "must include openid"),
        ({"oidc_issuer": "login.example.test"}, "must be an address"),
        ({"oidc_group_roles": '{"x": {"role": "job"}}'}, "not 'job'"),
        ({"oidc_group_roles": '{"x": {"role": "operator", "teams": "a"}}'}, "list of team names"),
        ({"oidc_group_roles": '{"x": {"role": "viewer", "team": ["a"]}}'}, "group 'x'"),
        ({"oidc_group_roles": "[1]"}, "dictionary"),
        ({"oidc_recheck_s": 901}, "900"),
        ({"oidc_cli_token_s": 3601}, "3600"),
    ],
)
def test_refused_with_the_reason(given: dict[str, object], said: str) -> None:
    with pytest.raises(ValidationError, match=said):
        load_settings(**configured(**given))
