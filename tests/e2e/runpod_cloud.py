"""The fake RunPod cloud in its own process, for the end-to-end tests that govern it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

from governor.fakes.runpod import CloudState
from tests.e2e.conftest import free_port, wait_for

KEY = "rpa_E2E_SECRET_KEY_42"


class RunPodCloud:
    """The fake RunPod cloud in its own process; its state file says what it was asked."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.state_file = workdir / "runpod.json"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, pods: str) -> RunPodCloud:
        args = ["--port", str(self.port), "--state", str(self.state_file), "--pods", pods]
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "governor.fakes.runpod",
                *args,
                "--api-key",
                KEY,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for(self._answers, "the fake RunPod cloud to listen", timeout_s=30)
        return self

    def _answers(self) -> bool:
        try:
            return httpx.get(f"{self.url}/_fake/state", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def state(self) -> CloudState:
        return CloudState.restore(json.loads(self.state_file.read_text()))

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=30)
