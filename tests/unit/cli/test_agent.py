"""The agent's backlog: bounded, sent oldest first, kept through outages, never resent."""

import json
from datetime import timedelta

import httpx
import pytest

from governor.cli import main
from governor.cli.agent.loop import Agent, Rejected, Target
from governor.domain.telemetry import Reading
from tests.clock import FrozenClock


class Ticking:
    """A telemetry source whose readings are numbered by their timestamps."""

    def __init__(self, clock: FrozenClock) -> None:
        self.clock = clock

    def read(self) -> Reading:
        self.clock.advance(1)
        return Reading(self.clock.now())

    def close(self) -> None:
        pass


class Server:
    """An HTTP handler that answers with the scripted statuses and keeps what it accepted."""

    def __init__(self, *statuses: int) -> None:
        self.statuses = list(statuses)
        self.received: list[str] = []
        self.paths: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        status = self.statuses.pop(0) if self.statuses else 202
        if status == 202:
            self.received += [r["at"] for r in json.loads(request.content)["readings"]]
        return httpx.Response(status, json={"error": {"code": "x", "message": "no such pod"}})


POD = Target("pod", "pod_1")


def agent_for(
    server: Server, clock: FrozenClock, backlog: int = 100, target: Target = POD
) -> Agent:
    client = httpx.Client(base_url="http://governor", transport=httpx.MockTransport(server))
    return Agent(Ticking(clock), client, target, clock, backlog=backlog)


def test_readings_wait_out_an_outage_and_arrive_in_order_once(clock: FrozenClock) -> None:
    server = Server(503, 503)
    agent = agent_for(server, clock)
    start = clock.now()
    for _ in range(2):
        agent.poll()
        assert not agent.flush()
    agent.poll()
    assert agent.flush()
    assert agent.flush()  # nothing left to send twice
    expected = [(start + timedelta(seconds=s)).isoformat() for s in (1, 2, 3)]
    assert server.received == expected
    assert (agent.sent, len(agent.backlog), agent.dropped) == (3, 0, 0)


def test_a_full_backlog_drops_the_oldest(clock: FrozenClock) -> None:
    server = Server(*([503] * 5))
    agent = agent_for(server, clock, backlog=3)
    start = clock.now()
    for _ in range(5):
        agent.poll()
        agent.flush()
    assert agent.dropped == 2
    assert agent.flush()
    assert server.received == [(start + timedelta(seconds=s)).isoformat() for s in (3, 4, 5)]


def test_a_rejection_says_what_to_fix(clock: FrozenClock) -> None:
    agent = agent_for(Server(404), clock)
    agent.poll()
    with pytest.raises(Rejected, match=r"HTTP 404: no such pod \(check --pod"):
        agent.flush()


def test_a_node_agent_reports_for_its_machine(clock: FrozenClock) -> None:
    server = Server(202, 403)
    agent = agent_for(server, clock, target=Target("node", "gpu-node-7"))
    agent.poll()
    assert agent.flush()
    agent.poll()
    with pytest.raises(Rejected, match=r"not an agent token for this node"):
        agent.flush()
    assert server.paths == ["/v1/nodes/gpu-node-7/telemetry"] * 2


def test_a_pods_agent_names_the_pods_own_gpus_with_every_batch(clock: FrozenClock) -> None:
    bodies: list[dict] = []

    def keep(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(202, json={})

    client = httpx.Client(base_url="http://governor", transport=httpx.MockTransport(keep))
    target = Target("pod", "pod-1", ("GPU-b",), (4101,), "python3*")
    agent = Agent(Ticking(clock), client, target, clock)
    agent.poll()
    assert agent.flush()
    assert bodies[0]["gpu_uuids"] == ["GPU-b"] and len(bodies[0]["readings"]) == 1
    assert (bodies[0]["process_pids"], bodies[0]["process_pattern"]) == ([4101], "python3*")
    assert Target("pod", "pod-1").body == {}  # naming nothing: every GPU and process, as before


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--pod", "pod-1", "--pids", "4101,x"], "--pids takes PIDs"),
        (["--node", "box", "--process-pattern", "python3*"], "give them with --pod"),
    ],
)
def test_the_agent_refuses_processes_it_cannot_name(
    args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["agent", "--server", "http://governor", "--token", "t", *args]) == 2
    assert said in capsys.readouterr().err


def test_an_agent_whose_pod_stopped_is_told_once_its_readings_are_not_kept(
    clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    not_kept = "readings arrive for a stopped pod and are not kept: stop its agent, or resume"
    answers = [{"not_kept": not_kept}] * 3 + [{"not_kept": None}]

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(202, json={"readings": 1, "samples": 0, **answers.pop(0)})

    client = httpx.Client(base_url="http://governor", transport=httpx.MockTransport(answer))
    agent = Agent(Ticking(clock), client, POD, clock)
    with caplog.at_level("INFO", logger="governor.agent"):
        for _ in range(4):
            agent.poll()
            assert agent.flush()  # it goes on: the pod may be resumed
    assert [r.getMessage() for r in caplog.records] == [
        f"the server keeps none of the pod's readings: {not_kept}",
        "the server keeps the pod's readings again",
    ]
    assert agent.sent == 4
