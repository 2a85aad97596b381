"""A flood of wrong tokens, from many addresses and from the victims' own, locks no one out:
every valid heartbeat and operator call is answered, no pod is stopped as heartbeat-lost, and
the sign-in page still lets the operator in; the flood itself is refused, 401 and then 429
once each address is past its failure rate. Clients come from addresses of 127.0.0.0/8, as
other hosts would."""

from __future__ import annotations

import itertools
import secrets
import threading
import time
from collections.abc import Callable, Sequence

import httpx
import pytest

from governor.services.security.auth_limits import MAX_WAIT_S
from tests.e2e.conftest import (
    OPERATOR_TOKEN,
    GovernorServer,
    ServerFactory,
    create_run,
    declare_budget,
    http_client,
    ok,
    register_pod,
    wait_for,
)

pytestmark = pytest.mark.e2e

PER_MINUTE = 10  # failures an address may make in a minute before 429
HEARTBEAT_TIMEOUT_S = 3.0
VICTIM = "127.0.0.1"  # the job's and the operator's address
# Wrong job tokens from eleven other addresses: more failures of one token prefix than the
# fleet could once share (ten times the per-address limit); wrong operator tokens from
# another; and both kinds, in turn, from the victims' own address.
FLOODS = [(f"127.0.0.{n}", ("gov_job_",)) for n in range(2, 13)] + [
    ("127.0.0.13", ("gov_op_",)),
    (VICTIM, ("gov_job_", "gov_op_")),
]


def flood(server: GovernorServer, address: str, prefixes: Sequence[str], path: str) -> list[int]:
    """Wrong tokens from `address`, one at a time, until one is refused as too many (at most
    three times the limit); then one more, which waits for the address's turn. The statuses,
    after checking that each refusal says why."""
    answers: list[httpx.Response] = []

    def wrong() -> httpx.Response:
        token = prefixes[len(answers) % len(prefixes)] + secrets.token_urlsafe(16)
        return client.post(path, json={"step": 1}, headers={"Authorization": f"Bearer {token}"})

    with http_client(server.url, local_address=address) as client:
        while len(answers) < 3 * PER_MINUTE and (not answers or answers[-1].status_code != 429):
            answers.append(wrong())
        answers.append(wrong())
    for answer in answers:
        if answer.status_code == 429:
            assert answer.json()["error"]["code"] == "too_many_attempts"
            assert 1 <= int(answer.headers["Retry-After"]) <= 60
    return [a.status_code for a in answers]


def refused_as_a_flood(statuses: list[int]) -> None:
    """401 for each failure within the address's rate, then 429 (a window may end between)."""
    assert statuses[:PER_MINUTE] == [401] * PER_MINUTE, statuses
    assert set(statuses) == {401, 429}, statuses


class Steady(threading.Thread):
    """Makes one call again and again until stopped: what each answer was, and when."""

    def __init__(self, call: Callable[[], httpx.Response], every_s: float) -> None:
        super().__init__(daemon=True)
        self.call, self.every_s = call, every_s
        self.answers: list[tuple[float, httpx.Response]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every_s):
            self.answers.append((time.monotonic(), self.call()))


def test_a_flood_of_wrong_tokens_stops_no_pod_and_locks_no_one_out(
    start_server: ServerFactory,
) -> None:
    server = start_server(GOVERNOR_AUTH_FAILURES_PER_MINUTE=str(PER_MINUTE))
    with (
        http_client(server.url, OPERATOR_TOKEN, local_address=VICTIM) as operator,
        http_client(server.url, local_address=VICTIM) as job,
    ):
        budget = declare_budget(operator, "1000.00")  # far away: the ceiling is no reason
        pod = register_pod(operator, budget["id"])
        run = create_run(operator, budget["id"], pod["id"], heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S)
        beat = f"/v1/runs/{run['id']}/heartbeat"
        job.headers["Authorization"] = f"Bearer {run['token']}"
        steps = itertools.count(1)
        beats = Steady(lambda: job.post(beat, json={"step": next(steps)}), every_s=0.1)
        looks = Steady(lambda: operator.get(f"/v1/pods/{pod['id']}"), every_s=0.25)
        beats.start()
        looks.start()
        try:
            wait_for(lambda: beats.answers, "the job's first heartbeat")
            floods: dict[str, list[int]] = {}

            def attack(address: str, prefixes: Sequence[str]) -> None:
                floods[address] = flood(server, address, prefixes, beat)

            threads = [threading.Thread(target=attack, args=f) for f in FLOODS]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=120)
            flooded_at = time.monotonic()
            # A token the server has not seen yet, first used from the victims' own address,
            # which is past its failure rate: it waits its turn and is answered.
            viewer = ok(operator.post("/v1/tokens", json={"role": "viewer"}), 201)["token"]
            with http_client(server.url, viewer, local_address=VICTIM) as newcomer:
                ok(newcomer.get("/v1/budgets"))
            # The job goes on beating for longer than twice its timeout after the flood.
            wait_for(
                lambda: beats.answers[-1][0] - flooded_at > 2 * HEARTBEAT_TIMEOUT_S,
                "the job to beat on after the flood",
            )
        finally:
            beats.stopped.set()
            looks.stopped.set()
            beats.join(timeout=60)
            looks.join(timeout=60)

        assert sorted(floods) == sorted(address for address, _ in FLOODS), "a flood hung"
        for statuses in floods.values():
            refused_as_a_flood(statuses)
        job_failures = sum(floods[a].count(401) for a, p in FLOODS if p == ("gov_job_",))
        assert job_failures > 10 * PER_MINUTE  # more than one prefix's failures could once be
        answered = [a.status_code for _, a in beats.answers + looks.answers]
        assert answered and set(answered) == {200}, answered
        assert {a.json()["action"] for _, a in beats.answers} == {"continue"}
        now = ok(operator.get(f"/v1/pods/{pod['id']}"))
        assert now["state"] == "running" and now["stop_order"] is None, now
        assert ok(operator.get(f"/v1/runs/{run['id']}"))["status"] == "running"


def sign_in(client: httpx.Client, token: str) -> httpx.Response:
    return client.post("/login", data={"token": token})


def test_a_flood_at_the_sign_in_page_still_lets_the_operator_in(
    start_server: ServerFactory,
) -> None:
    server = start_server(GOVERNOR_AUTH_FAILURES_PER_MINUTE=str(PER_MINUTE))
    flooder, elsewhere = "127.0.0.2", "127.0.0.3"
    with http_client(server.url, local_address=flooder) as page:
        answers: list[httpx.Response] = []
        while not answers or answers[-1].status_code != 429:
            assert len(answers) < 3 * PER_MINUTE, [a.status_code for a in answers]
            refused_from = time.monotonic()
            answers.append(sign_in(page, f"gov_op_{secrets.token_urlsafe(16)}"))
        refused_by = time.monotonic()
        assert [a.status_code for a in answers[:PER_MINUTE]] == [401] * PER_MINUTE
        assert "too many failed authentications" in answers[-1].text
        retry_after = int(answers[-1].headers["Retry-After"])
        assert 1 <= retry_after <= 60
        # The failures are counted in fixed windows; this one ends within (retry_after - 1,
        # retry_after] seconds of the refusal, which the server made between these two times.
        window_ends = (refused_from + retry_after - 1, refused_by + retry_after)

        with http_client(server.url, local_address=elsewhere) as other:
            signed_in = sign_in(other, OPERATOR_TOKEN)  # from another address: at once
        assert signed_in.status_code == 303 and signed_in.headers["location"] == "/status"
        assert "set-cookie" in signed_in.headers

        # An operator token this server has not seen yet, pasted from the flooding address:
        # it waits for that address's turn, within the bound, and signs in.
        with server.client() as api:
            fresh = ok(api.post("/v1/tokens", json={"role": "operator"}), 201)["token"]
        began = time.monotonic()
        same = sign_in(page, fresh)
        assert same.status_code == 303 and "set-cookie" in same.headers, same.text[:500]
        assert time.monotonic() - began < MAX_WAIT_S
        # Signing in counted for nothing: the address's next wrong token is still refused as
        # too many, while the window lasts (a busy machine may have outlasted it: then 401).
        sent = time.monotonic()
        wrong = sign_in(page, f"gov_op_{secrets.token_urlsafe(16)}").status_code
        if time.monotonic() < window_ends[0]:
            assert wrong == 429
        elif sent > window_ends[1]:
            assert wrong == 401
        else:
            assert wrong in (401, 429)
