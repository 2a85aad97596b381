"""The agent `governor agent` starts: it samples this machine's GPUs and pushes the readings to
the governor server, for one pod (`--pod`, an agent token for that pod) or for whatever pods
run on this machine (`--node`, a node agent's token: a Kubernetes DaemonSet on the GPU nodes).

A reading is never lost to a short outage: while the server cannot be reached, readings wait
in a bounded backlog (the oldest are dropped first when it is full) and are sent in order
once it answers again. A rejected token or an unknown pod stops the agent with a clear message.
A pod that is no longer running keeps none of its readings: the agent says so once, with what
to do, and goes on (the pod may be resumed).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Literal

import httpx

from governor.domain.ports import Clock
from governor.domain.telemetry import Reading, TelemetrySource

log = logging.getLogger("governor.agent")

BATCH = 100
STATUS_EVERY_S = 60.0


class Rejected(Exception):
    """The server refused the readings for a reason retrying will not fix."""


def to_json(reading: Reading) -> dict[str, Any]:
    payload = asdict(reading)
    payload["at"] = reading.at.isoformat()
    return payload


@dataclass(frozen=True)
class Target:
    """Whom the readings are for: one pod, or every pod on one machine."""

    kind: Literal["pod", "node"]
    name: str
    gpus: tuple[str, ...] | None = None  # a pod's own GPUs by UUID on a shared machine
    pids: tuple[int, ...] | None = None  # and its own processes there, by PID
    process_pattern: str | None = None  # and/or by name (a glob)

    @property
    def body(self) -> dict[str, Any]:
        """What every batch says besides its readings: a pod's own GPUs and processes, when
        named."""
        named = {
            "gpu_uuids": None if self.gpus is None else list(self.gpus),
            "process_pids": None if self.pids is None else list(self.pids),
            "process_pattern": self.process_pattern,
        }
        return {key: value for key, value in named.items() if value is not None}

    @property
    def path(self) -> str:
        return f"/v1/{self.kind}s/{self.name}/telemetry"

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


class Agent:
    def __init__(
        self,
        source: TelemetrySource,
        client: httpx.Client,
        target: Target,
        clock: Clock,
        backlog: int = 10_000,
    ) -> None:
        self.source = source
        self.client = client
        self.target = target
        self.clock = clock
        self.backlog: deque[Reading] = deque(maxlen=backlog)
        self.dropped = 0
        self.sent = 0
        self.reachable = True
        self.not_kept: str | None = None  # why the server keeps none of the readings, if so

    def poll(self) -> Reading:
        """Read the GPUs once and queue the reading."""
        reading = self.source.read()
        if len(self.backlog) == self.backlog.maxlen:
            self.dropped += 1
        self.backlog.append(reading)
        return reading

    def flush(self) -> bool:
        """Send the backlog, oldest first. False when the server could not be reached."""
        while self.backlog:
            batch = [self.backlog[i] for i in range(min(BATCH, len(self.backlog)))]
            if not self._send(batch):
                return False
            for _ in batch:
                self.backlog.popleft()
            self.sent += len(batch)
        return True

    def _send(self, batch: list[Reading]) -> bool:
        try:
            response = self.client.post(
                self.target.path,
                json={"readings": [to_json(r) for r in batch], **self.target.body},
            )
        except httpx.TransportError as exc:
            self._unreachable(f"{type(exc).__name__}: {exc}")
            return False
        if response.status_code in (429, 502, 503, 504) or response.status_code >= 500:
            self._unreachable(f"HTTP {response.status_code}")
            return False
        if response.status_code >= 400:
            raise Rejected(_explain(response, self.target))
        if not self.reachable:
            log.warning("the server answers again; sending %d buffered readings", len(self.backlog))
            self.reachable = True
        self._kept(response)
        return True

    def _kept(self, response: httpx.Response) -> None:
        """Say once that the server keeps none of the readings (the pod is not running), and
        once that it keeps them again."""
        try:
            answer = response.json()
        except ValueError:
            answer = None
        said = answer.get("not_kept") if isinstance(answer, dict) else None
        if said == self.not_kept:
            return
        if said:
            log.warning("the server keeps none of the %s's readings: %s", self.target.kind, said)
        else:
            log.warning("the server keeps the %s's readings again", self.target.kind)
        self.not_kept = said

    def _unreachable(self, why: str) -> None:
        if self.reachable:
            log.warning("cannot reach the server (%s); buffering readings", why)
        self.reachable = False


def _explain(response: httpx.Response, target: Target) -> str:
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = response.text[:200]
    hints = {
        401: "check --token (an agent token from POST /v1/tokens with role agent)",
        403: f"the token is not an agent token for this {target.kind}",
        404: f"check --{target.kind}: the server has no such {target.kind}",
    }
    hint = hints.get(response.status_code, "the server refused the readings")
    return f"HTTP {response.status_code}: {message} ({hint})"


def run(agent: Agent, interval_s: float, stop: threading.Event | None = None) -> int:
    """Poll and push every `interval_s` until stopped (SIGINT/SIGTERM or `stop`)."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    first = agent.poll()
    if first.available:
        names = ", ".join(f"{g.index}: {g.name}" for g in first.gpus) or "none"
        log.info("watching %d GPU(s) (%s)", len(first.gpus), names)
    else:
        log.warning(
            "%s. The agent keeps running and tells the server so; it will pick up a driver "
            "that appears later.",
            first.unavailable_reason,
        )
    next_status = agent.clock.now().timestamp() + STATUS_EVERY_S
    try:
        while True:
            agent.flush()
            now = agent.clock.now().timestamp()
            if now >= next_status:
                log.info(
                    "sent %d readings, %d waiting, %d dropped",
                    agent.sent,
                    len(agent.backlog),
                    agent.dropped,
                )
                next_status = now + STATUS_EVERY_S
            if stop.wait(interval_s):
                break
            agent.poll()
        agent.flush()  # one last push on the way out
    except Rejected as exc:
        log.error("the server rejected the readings: %s", exc)
        return 2
    finally:
        agent.source.close()
    log.info("stopped after sending %d readings", agent.sent)
    return 0
