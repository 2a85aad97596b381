"""A bug answered 500 is told to the log once a minute for each route and kind of error, with
its traceback: not once a request, and not a second time by the server."""

from __future__ import annotations

import logging

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from governor.api import errors


def test_a_bug_is_a_500_told_once_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    app = FastAPI()
    errors.install(app)

    @app.get("/broken/{item}")
    def broken(item: str) -> None:
        raise RuntimeError(f"a bug met {item}")

    with (
        TestClient(app, raise_server_exceptions=False) as client,
        caplog.at_level(logging.ERROR, logger="governor.api.errors"),
    ):
        answers = [client.get(f"/broken/{n}") for n in range(5)]

    assert {a.status_code for a in answers} == {500}
    assert {a.json()["error"]["code"] for a in answers} == {"internal_error"}
    told = [r for r in caplog.records if r.name == "governor.api.errors"]
    assert len(told) == 1 and told[0].exc_info is not None
    assert "GET /broken/{item}" in told[0].getMessage()
    assert "RuntimeError: a bug met 0" in told[0].getMessage()


def test_the_server_does_not_tell_an_answered_error_again() -> None:
    server = logging.getLogger("uvicorn.error")
    errors.install(FastAPI())

    def record(message: str) -> logging.LogRecord:
        return server.makeRecord(server.name, logging.ERROR, __file__, 1, message, (), None)

    assert not server.filter(record("Exception in ASGI application\n"))
    assert server.filter(record("Application startup failed. Exiting."))
