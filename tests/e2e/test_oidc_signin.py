"""Sign-in through a real, certified OpenID Connect provider (oidc-provider under Node.js).

The governor runs as a server; the provider in its own process; a person is an HTTP client
that follows redirects and submits the provider's login and consent pages. Shown: the
dashboard's sign-in (authorization code with PKCE), each group mapped to its role and teams,
the person recorded on what they do, a session that expires, a person removed from their
group losing access at the next re-check (every second here), and `governor login` (the
device flow) minting a token that ends within the hour.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import (
    HTTP_TIMEOUT_S,
    GovernorServer,
    clean_environ,
    is_postgres,
    migrate,
    ok,
    parse_time,
    utcnow,
    wait_for,
)
from tests.oidc_flows import CLIENT_ID, CLIENT_SECRET, IdentityProvider, submit_pages

ACCOUNTS = {
    "alice": {"email": "alice@example.com", "groups": ["ml-platform-admins"]},
    "bob": {"email": "bob@example.com", "groups": ["team-a"]},
    "carol": {"email": "carol@example.com", "groups": ["finance", "lab-everyone"]},
    "dave": {"email": "dave@example.com", "groups": ["lab-everyone"]},
    "erin": {"email": "erin@example.com", "groups": ["team-z"]},
}
GROUP_ROLES = {
    "ml-platform-admins": {"role": "operator"},
    "team-a": {"role": "operator", "teams": ["team-a"]},
    "finance": {"role": "viewer"},
    "team-z": {"role": "operator", "teams": ["team-z"]},  # a team the governor does not have
}

Started = tuple[GovernorServer, IdentityProvider]


@pytest.fixture
def signin_server(
    database_url: str, spawn: Callable[..., GovernorServer], tmp_path: Path
) -> Iterator[Callable[..., Started]]:
    """`signin_server(**env)`: a provider, and a governor that signs people in through it."""
    providers: list[IdentityProvider] = []

    def start(**env: str) -> Started:
        server = spawn(database_url)
        provider = IdentityProvider(tmp_path, ACCOUNTS, f"{server.url}/login/oidc/callback")
        providers.append(provider.start())
        server.env.update(
            GOVERNOR_OIDC_ISSUER=provider.issuer,
            GOVERNOR_OIDC_CLIENT_ID=CLIENT_ID,
            GOVERNOR_OIDC_CLIENT_SECRET=CLIENT_SECRET,
            GOVERNOR_OIDC_SCOPES="openid email groups",
            GOVERNOR_OIDC_GROUP_ROLES=json.dumps(GROUP_ROLES),
            GOVERNOR_OIDC_PROVIDER_NAME="the lab's provider",
            **env,
        )
        if is_postgres(database_url):
            migrate(database_url, server.workdir)
        server.start().wait_ready()
        with server.client() as operator:
            ok(operator.post("/v1/teams", json={"name": "team-a"}), 201)
        return server, provider

    yield start
    for provider in providers:
        provider.stop()


def browser(server: GovernorServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, follow_redirects=True, timeout=HTTP_TIMEOUT_S)


def sign_in(person: httpx.Client, server: GovernorServer, login: str) -> httpx.Response:
    """Through the sign-in button to the provider, its pages, and back."""
    page = person.get("/login")
    assert "Sign in with the lab&#39;s provider" in page.text, page.text
    return submit_pages(person, person.get("/login/oidc"), login, until=server.url)


def signed_in(person: httpx.Client, path: str = "/status") -> bool:
    answer = person.get(path)
    return answer.status_code == 200 and answer.url.path == path


def team_id(server: GovernorServer, name: str) -> str:
    with server.client() as operator:
        [team] = [t for t in ok(operator.get("/v1/teams"))["items"] if t["name"] == name]
    return str(team["id"])


def events(server: GovernorServer, subject: str | None = None) -> list[dict[str, Any]]:
    with server.client() as operator:
        params = {"category": "operator", **({"subject": subject} if subject else {})}
        return ok(operator.get("/v1/events", params=params))["items"]  # type: ignore[no-any-return]


def test_groups_map_to_roles_and_teams_and_the_person_is_recorded(
    signin_server: Callable[..., Started],
) -> None:
    server, _ = signin_server()

    with browser(server) as alice:
        answer = sign_in(alice, server, "alice")
        assert answer.status_code == 200 and "Signed in as alice@example.com" in answer.text
        assert signed_in(alice)
        assert 'data-field="person">alice@example.com<' in alice.get("/status").text
        tokens_page = alice.get("/status/tokens")  # for operators only
        assert tokens_page.status_code == 200
        # she revokes a token from the page: the event names her
        with server.client() as operator:
            doomed = ok(operator.post("/v1/tokens", json={"role": "viewer"}), 201)["id"]
        csrf = re.search(r'name="csrf" value="([^"]+)"', alice.get("/status/tokens").text)
        assert csrf is not None
        revoked = alice.post(f"/status/tokens/{doomed}/revoke", data={"csrf": csrf[1]})
        assert "notice=revoked" in str(revoked.url)
        alice.post("/logout", data={"csrf": csrf[1]})  # signing out ends her token everywhere
        assert not signed_in(alice)
    assert any(
        "session of alice@example.com ended: they signed out" in e["message"]
        for e in events(server)
    )
    [revocation] = [e for e in events(server, f"token:{doomed}") if "revoked" in e["message"]]
    assert "alice@example.com" in revocation["message"]
    by = revocation["evidence"]["by"]
    assert (by["subject"], by["email"], by["role"], by["teams"]) == (
        "alice",
        "alice@example.com",
        "operator",
        None,
    )

    with browser(server) as bob:  # operator for team-a only
        sign_in(bob, server, "bob")
        assert signed_in(bob)
    with browser(server) as carol:  # finance: a viewer, who may look but not administer
        sign_in(carol, server, "carol")
        assert signed_in(carol)
        assert carol.get("/status/tokens").status_code == 403
    with browser(server) as dave:  # in no mapped group: no session at all
        refused = sign_in(dave, server, "dave")
        assert refused.status_code == 403
        assert "none of the groups" in refused.text
        assert not signed_in(dave)
    with browser(server) as erin:  # her group grants a team the governor does not have
        refused = sign_in(erin, server, "erin")
        assert refused.status_code == 403
        assert "none the governor has" in refused.text

    signed = {
        e["evidence"]["by"]["subject"]: e
        for e in events(server)
        if "signed in (dashboard)" in e["message"]
    }
    assert set(signed) == {"alice", "bob", "carol"}
    assert signed["bob"]["evidence"]["by"]["teams"] == [team_id(server, "team-a")]
    assert "as operator for team-a" in signed["bob"]["message"]
    assert signed["carol"]["evidence"]["by"]["role"] == "viewer"
    assert signed["carol"]["evidence"]["groups"] == ["finance", "lab-everyone"]


def test_groups_are_read_again_at_each_recheck_and_removal_ends_access(
    signin_server: Callable[..., Started],
) -> None:
    server, provider = signin_server(GOVERNOR_OIDC_RECHECK_S="1")
    with browser(server) as bob:
        sign_in(bob, server, "bob")
        assert signed_in(bob, "/status/tokens")  # an operator (for team-a)

        provider.set_groups("bob", ["finance"])  # moved to a viewers' group

        def moved() -> bool:
            bob.get("/status")  # a session is re-checked when a request comes
            said = "bob@example.com is now viewer org-wide"
            return any(said in e["message"] for e in events(server))

        wait_for(moved, "the re-check to read bob's new group")
        assert signed_in(bob)
        assert bob.get("/status/tokens").status_code == 403

        provider.set_groups("bob", ["lab-everyone"])  # removed from every mapped group
        wait_for(lambda: not signed_in(bob), "bob's session to end at the next re-check")
        assert bob.get("/status").url.path == "/login"
    [ended] = [e for e in events(server) if "session of bob@example.com ended" in e["message"]]
    assert "no group of theirs is mapped" in ended["message"]
    assert ended["evidence"]["by"]["subject"] == "bob"


def test_a_provider_that_does_not_answer_keeps_the_session_but_lets_nothing_through(
    signin_server: Callable[..., Started],
) -> None:
    server, provider = signin_server(GOVERNOR_OIDC_RECHECK_S="1")
    with browser(server) as alice:
        sign_in(alice, server, "alice")
        assert signed_in(alice)
        provider.stop()

        refused = wait_for(
            lambda: (answer := alice.get("/status")).status_code == 503 and answer,
            "the re-check to find the provider down",
        )
        assert "your session is kept" in refused.text
    assert not any("session of alice" in e["message"] for e in events(server))


def test_a_session_expires(signin_server: Callable[..., Started]) -> None:
    server, _ = signin_server(GOVERNOR_OIDC_SESSION_S="8")
    with browser(server) as alice:
        sign_in(alice, server, "alice")
        assert signed_in(alice)
        cookie = alice.cookies["governor_session"]
        wait_for(lambda: not signed_in(alice), "the session to expire", timeout_s=60)
    with httpx.Client(base_url=server.url, timeout=HTTP_TIMEOUT_S) as replay:
        replay.cookies.set("governor_session", cookie)  # a copy kept past its time
        assert replay.get("/status").headers["location"].startswith("/login")


def test_the_command_line_signs_in_with_the_device_flow(
    signin_server: Callable[..., Started],
) -> None:
    server, _ = signin_server()
    login = subprocess.Popen(
        [sys.executable, "-m", "governor", "login", "--url", server.url],
        env=clean_environ(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert login.stderr is not None
        told = login.stderr.readline()
        where = re.search(r"Open (\S+) and confirm the code (\S+);", told)
        assert where is not None, told
        with httpx.Client(follow_redirects=True, timeout=HTTP_TIMEOUT_S) as person:
            done = submit_pages(person, person.get(where[1]), "bob")
            assert done.status_code == 200, done.text
        out, err = login.communicate(timeout=60)
    finally:
        if login.poll() is None:
            login.kill()
            login.wait()
    assert login.returncode == 0, err
    token = re.search(r"^export GOVERNOR_OPERATOR_TOKEN=(\S+)$", out, re.MULTILINE)
    until = re.search(r"signed in as bob@example.com: operator for team-a, until (\S+)", out)
    assert token is not None and until is not None, out
    assert parse_time(until[1]) <= utcnow() + timedelta(hours=1)

    with httpx.Client(base_url=server.url, timeout=HTTP_TIMEOUT_S) as cli:
        cli.headers["Authorization"] = f"Bearer {token[1]}"
        made = ok(cli.post("/v1/tokens", json={"role": "viewer", "label": "bob's"}), 201)
    [created] = events(server, f"token:{made['id']}")
    assert "bob@example.com" in created["message"]
    assert created["evidence"]["by"]["subject"] == "bob"
    assert created["evidence"]["by"]["teams"] == [team_id(server, "team-a")]
    # his token sees his team alone
    with httpx.Client(base_url=server.url, timeout=HTTP_TIMEOUT_S) as cli:
        cli.headers["Authorization"] = f"Bearer {token[1]}"
        assert [t["name"] for t in ok(cli.get("/v1/teams"))["items"]] == ["team-a"]
