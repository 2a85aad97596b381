"""What each launcher's request is read as: its candidates, nodes, budget label and hours."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
import yaml

from governor.api.gates import dstack, skypilot
from governor.api.gates.env import Env
from governor.domain.errors import Invalid
from governor.domain.launch_gate import Candidate


def sky(task: dict[str, object], request_name: str = "launch") -> skypilot.SkyRequest:
    inner = {
        "task": yaml.safe_dump(task),
        "skypilot_config": "{}\n",
        "request_name": request_name,
        "user": "id: u\nname: alice\n",
    }
    return skypilot.read(json.dumps(json.dumps(inner)).encode())


def test_skypilot_alternatives_share_the_top_level_fields() -> None:
    task = {
        "num_nodes": 2,
        "envs": {"GOVERNOR_MAX_HOURS": "3.5"},
        "resources": {
            "use_spot": True,
            "labels": {"governor-budget": "pilot"},
            "any_of": [
                {"infra": "aws/us-east-1", "accelerators": "H100:8"},
                {"infra": "gcp", "accelerators": ["A100:4", {"L4": 2}]},
            ],
        },
    }
    launch = skypilot.launch_request(sky(task))
    assert launch.candidates == (
        Candidate("aws", "H100", 8, True, "us-east-1"),
        Candidate("gcp", "A100", 4, True, None),
        Candidate("gcp", "L4", 2, True, None),
    )
    assert (launch.nodes, launch.budget_ref, launch.max_hours, launch.user) == (
        2,
        "pilot",
        Decimal("3.5"),
        "alice",
    )


def test_skypilot_acceptance_labels_every_alternative_and_keeps_the_tasks_own_url() -> None:
    request = sky(
        {
            "envs": {"GOVERNOR_URL": "https://gov.internal"},
            "resources": {"any_of": [{"accelerators": "H100:1", "labels": {"team": "a"}}]},
        }
    )
    env = Env("http://gate", "gov_claim_x")
    body = json.loads(json.loads(skypilot.accepted(request, {"governor-launch": "lch_1"}, env)))
    task = yaml.safe_load(body["task"])
    assert task["resources"]["labels"] == {"governor-launch": "lch_1"}
    assert task["resources"]["any_of"][0]["labels"] == {"team": "a", "governor-launch": "lch_1"}
    assert task["envs"] == {"GOVERNOR_URL": "https://gov.internal", "GOVERNOR_CLAIM": "gov_claim_x"}


def test_a_body_skypilot_could_not_have_sent_is_invalid() -> None:
    with pytest.raises(Invalid):
        skypilot.read(b'{"task": 1}')


@pytest.mark.parametrize(
    ("gpu", "read"),
    [
        ("H100:8", [("H100", 8)]),
        ("A100,H100:2", [("A100", 2), ("H100", 2)]),
        ({"name": ["H100"], "count": {"min": 1, "max": 4}}, [("H100", 4)]),
        ({"count": 2}, [("any GPU", 2)]),
        (None, []),
    ],
)
def test_dstack_gpu_requests(gpu: object, read: list[tuple[str, int]]) -> None:
    conf = {"type": "task", "resources": {"gpu": gpu}, "max_duration": "90m", "nodes": 2}
    launch = dstack.launch_request(
        dstack.read({"user": "u", "project": "p", "spec": {"configuration": conf}})
    )
    assert [(c.accelerator, c.count) for c in launch.candidates if c.accelerator] == read
    assert (launch.nodes, launch.max_hours, launch.project) == (2, Decimal("1.5"), "p")
