"""Over HTTP, well-formed beats that arrive while a group of them is being answered are
answered together, in the next group, each with its own answer."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from governor.api.heartbeat import route as heartbeat_route
from governor.api.heartbeat.lean import LeanRoute
from governor.services.jobs import checkins
from tests.integration.conftest import Governor, ok

DEADLINE_S = 30.0
[HEARTBEAT] = [r for r in heartbeat_route.router.routes if isinstance(r, LeanRoute)]


def wait_until(condition: Callable[[], bool]) -> None:
    ends = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > ends:
            raise AssertionError("the condition never held")
        time.sleep(0.01)


def test_beats_that_arrive_while_a_group_is_answered_are_answered_together(
    gov: Governor, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    budget = gov.budget("1000")
    runs = [gov.run(budget, gov.pod(budget, ref=f"pod-{n}")) for n in range(5)]
    gov.tick()  # the enforcement pass keeps the figures that plain beats answer with
    groups: list[list[str]] = []
    first_taken, release = threading.Event(), threading.Event()
    take = checkins.check_in_group

    def held_first(
        sessions: sessionmaker[Session], beats: Sequence[tuple[str, Any]], now: datetime
    ) -> list[checkins.Directive | Exception | None]:
        groups.append([run for run, _ in beats])
        if len(groups) == 1:
            first_taken.set()
            assert release.wait(DEADLINE_S)
        return take(sessions, beats, now)

    monkeypatch.setattr(checkins, "check_in_group", held_first)
    answers: dict[str, httpx.Response] = {}

    def beat(run: str) -> None:
        answers[run] = client.post(f"/v1/runs/{run}/heartbeat", json={"step": 3})

    first = threading.Thread(target=beat, args=(runs[0],))
    first.start()
    assert first_taken.wait(DEADLINE_S)
    others = [threading.Thread(target=beat, args=(run,)) for run in [*runs[1:], "run_gone"]]
    for thread in others:
        thread.start()
    queues = type(HEARTBEAT).queues  # by app
    wait_until(lambda: queues[client.app].waiting == len(others))
    release.set()
    for thread in [first, *others]:
        thread.join(DEADLINE_S)
        assert not thread.is_alive()

    assert [sorted(group) for group in groups] == [runs[:1], sorted([*runs[1:], "run_gone"])]
    assert [ok(answers[run])["action"] for run in runs] == ["continue"] * 5
    assert answers["run_gone"].status_code == 404, answers["run_gone"].text
    with gov.session() as s:
        assert all(checkins.repo.get_run(s, run).step == 3 for run in runs)
