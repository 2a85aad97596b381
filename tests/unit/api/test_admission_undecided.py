"""The admission webhook when it cannot reach its database: it answers within its bound, per
GOVERNOR_WEBHOOK_ON_ERROR, saying it could not decide; a workload without GPUs never needs the
database and is allowed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from governor.app import create_admission_app
from governor.db.engine import build_engine, session_factory
from governor.domain.ports import SystemClock
from governor.services.context import GovernorConfig, ServiceContext
from governor.services.replica.health import TickLog
from governor.services.replica.leadership import Lease
from governor.settings import load_settings
from tests import kube_objects as k
from tests.clock import FrozenClock

UNREACHABLE = "postgresql+psycopg://nobody@127.0.0.1:1/none"  # nothing listens on port 1


def _review(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "batch", "version": "v1", "kind": obj["kind"]},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "operation": "CREATE",
            "namespace": "ml",
            "userInfo": {"username": "alice"},
            "object": obj,
        },
    }


@pytest.fixture(params=["deny", "allow"])
def webhook(request: pytest.FixtureRequest) -> Iterator[tuple[TestClient, str]]:
    engine = build_engine(UNREACHABLE)
    sessions = session_factory(engine)
    ctx = ServiceContext(
        engine=engine,
        sessions=sessions,
        clock=FrozenClock(),
        providers={},
        config=GovernorConfig(webhook_on_error=request.param),
        ticks=TickLog(),
        lease=Lease(sessions, SystemClock(), "test", lease_s=3600.0),
    )
    app = create_admission_app(load_settings(database_url=UNREACHABLE), ctx)
    try:
        with TestClient(app) as client:
            yield client, request.param
    finally:
        engine.dispose()


def test_unreachable_database_is_answered_per_the_setting(
    webhook: tuple[TestClient, str],
) -> None:
    client, on_error = webhook
    job = k.job("train", 8, labels={"governor-budget": "research"})
    found = client.post("/validate", json=_review(job))
    assert found.status_code == 200
    response = found.json()["response"]
    message = response["status"]["message"]
    assert "could not decide on Job ml/train (the database is not reachable)" in message
    assert f"GOVERNOR_WEBHOOK_ON_ERROR={on_error}" in message
    if on_error == "deny":
        assert response["allowed"] is False and response["status"]["code"] == 503
    else:
        assert response["allowed"] is True and response["warnings"] == [message]
    cpu = client.post("/validate", json=_review(k.job("cpu", 0))).json()["response"]
    assert cpu["allowed"] is True
