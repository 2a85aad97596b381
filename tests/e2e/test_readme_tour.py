"""The tour of the API (docs/tour.md, linked from the README's Quickstart), taken from the page
itself and run with bash against a live server, as a reader pastes it: every response has the
keys, types and states the tour's `# ->` lines show (their ids, figures and times are
illustrations)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from governor.domain.model import PodState
from tests.e2e.conftest import (
    OPERATOR_TOKEN,
    GovernorServer,
    ServerFactory,
    clean_environ,
    get_pod,
    utcnow,
    wait_pod_stopped,
)
from tests.programs import program

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TOUR = ROOT / "docs" / "tour.md"
SECTION = "## A tour of the API"
CLI_SECTION = "## From the command line"
TOUR_SERVER = "http://127.0.0.1:8000"  # what `make serve` listens on; the test's own port here
TOUR_TIMEOUT_S = 120
# Values a reader compares word for word: states, verdicts and what they typed themselves.
EXACT = {
    "action",
    "category",
    "decision_note",
    "directive",
    "name",
    "provider",
    "provider_ref",
    "rate_source",
    "reason",
    "rule",
    "severity",
    "state",
    "status",
    "verdict",
}
ID = re.compile(r"^[a-z]+_[0-9a-f]{8,}$")
MONEY = re.compile(r"^-?\d+\.\d+$")
ELISION = re.compile(r",\s*\.\.\.(?=\s*[}\]])")

# Each curl call's output is kept under the line of the tour that made it (the last call of a
# line wins); --fail-with-body makes an HTTP error end the tour, as `set -e` does any failure.
RECORDER = """curl() {
  command curl --fail-with-body "$@" | tee "$TOUR_RESPONSES/$((BASH_LINENO[0] - PRELUDE))"
}
"""


def tour_script(title: str = SECTION) -> str:
    """The shell blocks of one section of the tour (the API's by default), in order, joined."""
    text = TOUR.read_text()
    assert title in text, f"docs/tour.md has no {title!r} section"
    section = text.split(title, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```sh\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert blocks, f"the tour's {title!r} has no ```sh block"
    return "\n".join(blocks)


@dataclass(frozen=True)
class Illustration:
    line: int  # 1-based, in the tour script
    text: str
    shape: Any


def illustrations(script: str) -> list[Illustration]:
    """Each `# -> ...` comment (with its indented continuation lines), parsed as JSON with
    `...` standing for what it leaves out."""
    lines = script.splitlines()
    found = []
    for number, line in enumerate(lines, 1):
        if not line.startswith("# -> "):
            continue
        parts = [line.removeprefix("# -> ")]
        for following in lines[number:]:
            if not following.startswith("#  "):
                break
            parts.append(following.removeprefix("#").strip())
        text = " ".join(parts)
        try:
            shape = json.loads(ELISION.sub("", text))
        except json.JSONDecodeError as exc:
            raise AssertionError(f"tour line {number}: not JSON ({exc}): {text}") from exc
        found.append(Illustration(number, text, shape))
    return found


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # as `make serve` runs
def test_the_readme_tour_runs_top_to_bottom_and_shows_what_comes_back(
    start_server: ServerFactory, tmp_path: Path
) -> None:
    program("curl")  # the tour's calls
    program("jq")  # the ids it takes out of their responses
    script = tour_script()
    shown = illustrations(script)
    assert len(shown) >= 10, "the tour shows too few responses"
    assert script.count(TOUR_SERVER) == 1, f"the tour names the server once, as {TOUR_SERVER}"
    server = start_server(GOVERNOR_FAKE_HOURLY_RATE_USD="2.00")  # what `make serve` bills

    responses = run_tour(script.replace(TOUR_SERVER, server.url), server, tmp_path)
    # the job's token stays in the shell: no file the tour leaves behind holds it
    left = [f.name for f in tmp_path.iterdir() if f.is_file() and "gov_job_" in f.read_text()]
    assert left == [], f"the tour leaves the job's token in {left}"
    assert not (tmp_path / "run.json").exists()

    for number, body in sorted(responses.items()):
        assert not (isinstance(body, dict) and "error" in body), f"line {number}: {body}"
    ids: dict[str, str] = {}  # an id illustrated twice is the same thing twice
    previous = 0
    for shown_here in shown:
        calls = [n for n in responses if previous < n < shown_here.line]
        assert calls, f"tour line {shown_here.line}: no call before it shows a response"
        actual = responses[max(calls)]
        where = f"tour line {shown_here.line} ({shown_here.text[:60]}...)"
        matches(shown_here.shape, actual, where, ids)
        previous = shown_here.line

    # The acknowledgement ends the stop long before its 300 s deadline: the pod stops, keeping
    # its workspace, with the save.
    with server.client() as operator:
        pod_id = next(i for i in ids.values() if i.startswith("pod_"))
        wait_pod_stopped(operator, pod_id)
        checkpoint = get_pod(operator, pod_id)["stop_order"]["ack_checkpoint"]
    assert checkpoint == {"step": 130, "path": "/workspace/ckpt-130"}
    assert server.cloud_pod("pod-1").state(utcnow()) is PodState.STOPPED  # stopped, not gone


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # as `make serve` runs
def test_the_command_line_section_runs_as_pasted_after_the_api_tour(
    start_server: ServerFactory, tmp_path: Path
) -> None:
    """The API tour, then the command line's block, in one shell as a reader pastes them: from
    the repository's root, where `make serve` left its environment (.venv), which the block
    activates to find `governor`."""
    environment = Path(sys.executable).parent.parent  # the environment running these tests
    assert (environment / "bin" / "activate").is_file(), f"{environment} is not a virtualenv"
    (tmp_path / ".venv").symlink_to(environment)
    cli = tour_script(CLI_SECTION)
    assert "GOVERNOR_TOKEN" not in cli, "the tour uses GOVERNOR_OPERATOR_TOKEN"
    server = start_server(GOVERNOR_FAKE_HOURLY_RATE_USD="2.00")
    script = f"{tour_script()}\n{cli}".replace(TOUR_SERVER, server.url)

    run_tour(script, server, tmp_path)

    with server.client() as operator:
        (budget,) = operator.get("/v1/budgets", params={"name": "sft-sweep"}).json()["items"]
        assert budget["require_plan"] is True
        assert budget["approved_extensions_usd"] == "100.00"
        (pod,) = operator.get("/v1/pods", params={"name": "h200-sweep"}).json()["items"]
        plans = operator.get(f"/v1/budgets/{budget['id']}/plans").json()["items"]
        assert [p["verdict"] for p in plans] == ["go", "go"]  # submitted twice, as shown
        assert pod["plan_id"] == plans[-1]["id"]
        assert get_pod(operator, pod["id"])["stop_order"]["reason"] == "manual"
    report = (tmp_path / "sft-sweep-report.md").read_text()
    assert "sft-sweep" in report and "h200-sweep" in report


def run_tour(script: str, server: GovernorServer, workdir: Path) -> dict[int, Any]:
    """Run the tour with bash from a copy of the repository's example files, as from its root,
    stopping at the first failure; each line's last response."""
    recorded = workdir / "responses"
    recorded.mkdir()
    examples = Path("docs", "examples")  # the tour runs from the repository's root
    shutil.copytree(ROOT / examples, workdir / examples)
    prelude = f"PRELUDE={RECORDER.count(chr(10)) + 1}\n{RECORDER}"
    env = {
        **clean_environ(),
        "GOVERNOR_OPERATOR_TOKEN": OPERATOR_TOKEN,
        "TOUR_RESPONSES": str(recorded),
    }
    result = subprocess.run(
        [program("bash"), "-euo", "pipefail", "-c", prelude + script],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=TOUR_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, (
        f"the tour failed ({result.returncode}):\n{result.stdout}\n--- stderr ---\n"
        f"{result.stderr}\n--- server ---\n{server.log_tail(40)}"
    )
    return {int(f.name): json.loads(f.read_text()) for f in recorded.iterdir()}


def matches(shape: Any, actual: Any, where: str, ids: dict[str, str], key: str = "") -> None:
    """`actual` has what `shape` shows: its keys, each value's type, states word for word,
    money as a decimal string, times as aware ISO times, ids with their prefix."""
    what = f"{where}: {key or 'the response'}"
    if isinstance(shape, dict):
        assert isinstance(actual, dict), f"{what}: expected an object, got {actual!r}"
        for name, value in shape.items():
            assert name in actual, f"{what}: no {name!r} in {sorted(actual)}"
            matches(value, actual[name], where, ids, f"{key}.{name}" if key else name)
    elif isinstance(shape, list):
        assert isinstance(actual, list), f"{what}: expected a list, got {actual!r}"
        assert len(actual) >= len(shape), f"{what}: expected {len(shape)}+ items, got {actual}"
        for index, value in enumerate(shape):
            matches(value, actual[index], where, ids, f"{key}[{index}]")
    elif shape is None or isinstance(shape, bool):
        assert actual == shape, f"{what}: expected {shape!r}, got {actual!r}"
    elif isinstance(shape, int | float):
        assert isinstance(actual, int | float) and not isinstance(actual, bool), (
            f"{what}: expected a number, got {actual!r}"
        )
    else:
        assert isinstance(actual, str), f"{what}: expected a string, got {actual!r}"
        matches_text(shape, actual, what, ids, key.rsplit(".", 1)[-1])


def matches_text(shape: str, actual: str, what: str, ids: dict[str, str], name: str) -> None:
    if name in EXACT:
        assert actual == shape, f"{what}: expected {shape!r}, got {actual!r}"
    elif ID.match(shape):
        prefix = shape.split("_", 1)[0] + "_"
        assert actual.startswith(prefix), f"{what}: expected an id {prefix}..., got {actual!r}"
        assert ids.setdefault(shape, actual) == actual, (
            f"{what}: the tour shows {shape} again, but this is {actual}, not {ids[shape]}"
        )
    elif MONEY.match(shape):
        assert MONEY.match(actual), f"{what}: expected a decimal string, got {actual!r}"
    elif shape.endswith("..."):
        assert actual.startswith(shape.removesuffix("...")), (
            f"{what}: expected {shape!r}, got {actual!r}"
        )
    else:
        try:
            datetime.fromisoformat(shape)
        except ValueError:
            return  # free text (a message): a string is all the tour promises
        assert datetime.fromisoformat(actual).tzinfo is not None, (
            f"{what}: expected an aware ISO time, got {actual!r}"
        )
