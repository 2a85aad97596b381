"""`governor token create|list|revoke`: the request each sends, and what it prints."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.unit.cli.scripted import POD_ID, TOKEN_ID, Governor, body, page, pod_out, token_out


def test_create_posts_an_agent_token_for_the_named_pod_and_prints_it_once(
    governor: Governor,
) -> None:
    governor.has("/v1/pods", pod_out())
    created = token_out(role="agent", label="agent on box-1", pod_id=POD_ID, token="gov_ag_1")
    governor.answer("POST", "/v1/tokens", {**created, "expires_at": "2027-01-01T00:00:00+00:00"})
    ran = governor.run(
        "token", "create", "--role", "agent", "--pod", "gpu-a", "--label", "agent on box-1",
        "--expires-at", "2027-01-01T00:00:00+00:00",
    )  # fmt: skip
    assert ran.sent == [("GET", "/v1/pods?name=gpu-a&limit=1000"), ("POST", "/v1/tokens")]
    assert body(ran.last) == {
        "role": "agent",
        "label": "agent on box-1",
        "pod_id": POD_ID,
        "expires_at": "2027-01-01T00:00:00+00:00",
    }
    assert ran.code == 0
    assert ran.out == (
        f"id       {TOKEN_ID}\n"
        "role     agent\n"
        f"pod      {POD_ID}\n"
        "label    agent on box-1\n"
        "expires  2027-01-01T00:00:00+00:00\n"
        "\n"
        "The token (shown once; store it now):\n"
        "  gov_ag_1\n"
    )


def test_create_a_node_agents_token_that_never_expires(governor: Governor) -> None:
    governor.answer("POST", "/v1/tokens", token_out(role="agent", node="box-1", token="gov_ag_2"))
    ran = governor.run("token", "create", "--role", "agent", "--node", "box-1")
    assert body(ran.last) == {"role": "agent", "node": "box-1"}
    assert "node     box-1\n" in ran.out and "expires  never\n" in ran.out


def test_list_says_whom_each_token_is_for_and_whether_it_still_works(
    governor: Governor,
) -> None:
    past = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    tokens = [
        token_out(bootstrap=True, label=None),
        token_out(id="tok_2", role="agent", pod_id=POD_ID, expires_at=future, label="a"),
        token_out(id="tok_3", role="agent", node="box-1", expires_at=past, label="b"),
        token_out(id="tok_4", role="job", run_id="run_1", revoked_at=past, label="c"),
    ]
    governor.answer("GET", "/v1/tokens", page(*tokens))
    ran = governor.run("token", "list", "--limit", "4")
    assert ran.sent == [("GET", "/v1/tokens?limit=4")]
    rows = [line.split() for line in ran.out.splitlines()]
    assert rows[0] == ["id", "role", "label", "for", "teams", "created", "expires", "state"]
    assert [(row[0], row[-1]) for row in rows[1:]] == [
        (TOKEN_ID, "active"),
        ("tok_2", "active"),
        ("tok_3", "expired"),
        ("tok_4", "revoked"),
    ]
    assert [row[3] for row in rows[2:]] == [POD_ID, "box-1", "run_1"]
    assert rows[1][2:5] == ["-", "bootstrap", "all"]
    assert [row[4] for row in rows[2:]] == ["-", "-", "-"]


def test_create_a_viewer_for_named_teams_and_list_what_each_token_is_for(
    governor: Governor,
) -> None:
    created = token_out(role="viewer", label="ml", teams=["team_a", "team_b"], token="gov_v")
    governor.answer("POST", "/v1/tokens", created)
    ran = governor.run("token", "create", "--role", "viewer", "--teams", "alpha, beta")
    assert body(ran.last) == {"role": "viewer", "teams": ["alpha", "beta"]}
    assert "teams    team_a,team_b\n" in ran.out
    governor.answer("GET", "/v1/tokens", page(token_out(role="approver", teams=["team_a"])))
    ran = governor.run("token", "list")
    assert ran.out.splitlines()[1].split()[1:4] == ["approver", "ops", "team_a"]


def test_revoke_posts_nothing_but_the_id_and_shows_the_token(governor: Governor) -> None:
    revoked = token_out(revoked_at="2026-04-02T00:00:00+00:00")
    governor.answer("POST", f"/v1/tokens/{TOKEN_ID}/revoke", revoked)
    ran = governor.run("token", "revoke", TOKEN_ID)
    assert ran.sent == [("POST", f"/v1/tokens/{TOKEN_ID}/revoke")]
    assert ran.last.content == b""
    assert ran.out.splitlines() == [
        "id                    role      label  for  teams  created                    expires"
        "  state",
        f"{TOKEN_ID}  operator  ops         all    2026-04-01T09:00:00+00:00  -        revoked",
    ]
