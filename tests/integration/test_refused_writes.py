"""The database refuses a heartbeat's write (PostgreSQL out of disk, played by a trigger that
raises `disk_full` on the runs table): the job gets a clean 503 with Retry-After, readiness
and /metrics say writes are refused from that very request, and the next write that commits
ends the outage."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from governor.app import create_app
from governor.db import schema
from governor.services.security import tokens
from governor.settings import load_settings
from tests.clock import FrozenClock
from tests.conftest import reset_postgres
from tests.integration.api_scene import pilot
from tests.integration.conftest import Governor, make_governor

pytestmark = pytest.mark.postgres

OPERATOR = "refused-writes-operator"
REFUSE = """
CREATE FUNCTION refuse_writes() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full';
END $$ LANGUAGE plpgsql;
CREATE TRIGGER refuse_writes BEFORE UPDATE ON runs FOR EACH ROW EXECUTE FUNCTION refuse_writes();
"""


@dataclass
class World:
    gov: Governor
    client: TestClient
    run: str
    job: dict[str, str]

    def beat(self, step: int) -> httpx.Response:
        return self.client.post(
            f"/v1/runs/{self.run}/heartbeat", json={"step": step}, headers=self.job
        )

    def refuse_writes(self, refuse: bool) -> None:
        with self.gov.ctx.engine.begin() as connection:
            if refuse:
                connection.execute(text(REFUSE))
            else:
                connection.execute(text("DROP TRIGGER refuse_writes ON runs"))


@pytest.fixture
def world() -> Iterator[World]:
    url = reset_postgres()
    schema.upgrade(url)
    gov = make_governor(url, FrozenClock())
    with gov.session() as session:
        tokens.bootstrap_operator(session, OPERATOR, gov.clock.now())
    settings = load_settings(database_url=url, scheduler_enabled=False)
    with TestClient(
        create_app(settings, gov.ctx), headers={"Authorization": f"Bearer {OPERATOR}"}
    ) as client:
        made = pilot(client, "refused")
        yield World(gov, client, made["run"], {"Authorization": f"Bearer {made['job']}"})
    gov.ctx.engine.dispose()


def test_a_heartbeat_the_database_refuses_is_a_503_and_readiness_says_so_at_once(
    world: World,
) -> None:
    assert world.beat(1).status_code == 200
    assert world.client.get("/readyz").status_code == 200

    world.refuse_writes(True)
    refused = world.beat(2)
    assert refused.status_code == 503, refused.text
    assert int(refused.headers["Retry-After"]) > 0
    readyz = world.client.get("/readyz")
    assert readyz.status_code == 503
    assert readyz.json()["checks"]["writes"].startswith("refused since"), readyz.json()
    assert "governor_database_writes_failing 1.0" in world.client.get("/metrics").text

    world.refuse_writes(False)
    assert world.beat(3).status_code == 200
    assert world.client.get("/readyz").status_code == 200
    assert "governor_database_writes_failing 0.0" in world.client.get("/metrics").text
