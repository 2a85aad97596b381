"""The token lifecycle on the real schema: the bootstrap operator token is rotated, never
revoked by a replica's start; revoked and expired tokens end their dashboard sessions too
(SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from governor.db import repository as repo
from governor.domain.errors import Conflict, Unauthenticated
from governor.domain.model import Role
from governor.domain.paging import WHOLE
from governor.domain.teams import DEFAULT_TEAM_ID, EVERY_TEAM
from governor.services.fleet import budgets, pods
from governor.services.runs import lifecycle
from governor.services.security import logins, tokens
from governor.services.view import token_list
from tests.integration.conftest import BY, Governor, counted


def test_a_new_bootstrap_token_is_adopted_beside_the_old_until_it_is_rotated(
    gov: Governor,
) -> None:
    now = gov.clock.now()
    with gov.session() as s:
        tokens.bootstrap_operator(s, "gov_op_first-bootstrap", now)
    with gov.session() as s:  # a rolling update: the new value on one replica only
        tokens.bootstrap_operator(s, "gov_op_second-bootstrap", now)
        assert tokens.authenticate(s, "gov_op_first-bootstrap", now).role is Role.OPERATOR
    with gov.session() as s:
        assert tokens.rotate_bootstrap(s, "gov_op_second-bootstrap", now) == 1
    with gov.session() as s:
        with pytest.raises(Unauthenticated, match="revoked"):
            tokens.authenticate(s, "gov_op_first-bootstrap", now)
        assert tokens.authenticate(s, "gov_op_second-bootstrap", now).role is Role.OPERATOR
        assert tokens.rotate_bootstrap(s, "gov_op_second-bootstrap", now) == 0
        [current] = repo.bootstrap_tokens(s)
        with pytest.raises(Conflict, match="rotate-bootstrap"):
            tokens.revoke(s, current.id, now, by=BY)


def test_a_revoked_or_expired_token_ends_its_dashboard_sessions(gov: Governor) -> None:
    now = gov.clock.now()
    with gov.session() as s:
        lasting = tokens.issue(s, Role.VIEWER, now, label="wall screen")
        brief = tokens.issue(s, Role.VIEWER, now, expires_at=now + timedelta(hours=1))
    with gov.session() as s:
        lasting_id = logins.sign_in(tokens.authenticate(s, lasting, now)).token_id
        brief_id = logins.sign_in(tokens.authenticate(s, brief, now)).token_id
        assert logins.role_of(s, brief_id, now + timedelta(minutes=59)) is Role.VIEWER
        assert logins.role_of(s, brief_id, now + timedelta(hours=1)) is None
        with pytest.raises(Unauthenticated, match="expired"):
            tokens.authenticate(s, brief, now + timedelta(hours=2))
        tokens.revoke(s, lasting_id, now, by=BY)
    with gov.session() as s:
        assert logins.role_of(s, lasting_id, now) is None
        [event] = repo.events(s, subject=f"token:{lasting_id}")
        assert "wall screen" in event.message and "revoked" in event.message


def test_a_released_pods_agent_token_ends(gov: Governor) -> None:
    budget = gov.budget("100")
    pod = gov.pod(budget)
    now = gov.clock.now()
    with gov.session() as s:
        agent = tokens.issue(s, Role.AGENT, now, pod_id=pod)
        pods.stop_manually(s, gov.ctx, pod, "done", now, by=BY)
    gov.tick(1)
    gov.tick(30)
    with gov.session() as s:
        budgets.close(s, budget, "over", True, gov.clock.now(), by=BY)
    with gov.session() as s, pytest.raises(Unauthenticated, match="revoked"):
        tokens.authenticate(s, agent, gov.clock.now())


def test_the_operators_list_names_what_each_token_is_bound_to(gov: Governor) -> None:
    budget = gov.budget()
    pod = gov.pod(budget, ref="gpu-a")
    run = gov.run(budget, pod)
    now = gov.clock.now()
    with gov.session() as s:
        tokens.grant(s, Role.AGENT, now, by=BY, label="agent of gpu-a", pod_id=pod)
        tokens.grant(s, Role.AGENT, now, by=BY, label="node agent", node="node-7")
        tokens.grant(s, Role.VIEWER, now, by=BY, label="wallboard")
        listed = token_list.token_list(s, WHOLE, EVERY_TEAM)
    bound = {
        (line.token.label or line.token.role.value): [(b.kind, b.name, b.id) for b in line.bound_to]
        for line in listed.tokens
    }
    assert bound == {
        "job": [("run", "job", run), ("pod", "gpu-a", pod), ("budget", "pilot", budget)],
        "agent of gpu-a": [("pod", "gpu-a", pod), ("budget", "pilot", budget)],
        "node agent": [("node", "node-7", None)],
        "wallboard": [],
    }
    assert not listed.more


def test_a_job_token_is_looked_up_in_one_statement_and_a_teams_token_names_its_teams(
    gov: Governor,
) -> None:
    """The heartbeat's caller costs what it did before teams: a job's (or an agent's) token
    is never scoped to teams, so nothing more is read for it."""
    budget = gov.budget(ceiling="100")
    pod = gov.pod(budget)
    spec = lifecycle.RunSpec("job", pod, None, 120.0, 300.0)
    with gov.session() as s:
        _, job_token = lifecycle.create(s, gov.ctx.config, budget, spec, gov.clock.now())
        viewer = tokens.issue(s, Role.VIEWER, gov.clock.now(), teams=frozenset({DEFAULT_TEAM_ID}))
    with counted(gov) as statements, gov.session() as s:
        job = tokens.authenticate(s, job_token, gov.clock.now())
    assert job.team_ids is None and job.teams.sees("any team")
    assert [q for q in statements if "token" in q.lower()] == [statements[-1]]
    assert "token_teams" not in " ".join(statements)
    with gov.session() as s:
        scoped = tokens.authenticate(s, viewer, gov.clock.now())
    assert scoped.team_ids == {DEFAULT_TEAM_ID}
    assert not scoped.teams.sees("team_other")
