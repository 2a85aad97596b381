"""SkyPilot's own REST admin-policy client judging a task at the governor, as SkyPilot's API
server does for `sky launch`. Run by the SkyPilot virtualenv's interpreter:

    python skypilot_launch.py POLICY_URL REQUEST_JSON

REQUEST_JSON: {"request_name", "user", "num_nodes", "envs", "resources": [{accelerators,
use_spot, infra, labels}, ...]}. Prints {"accepted", "error", "labels", "envs"} as JSON.
"""

from __future__ import annotations

import json
import sys

import sky
from sky import exceptions, models
from sky.admin_policy import RestfulAdminPolicy, UserRequest
from sky.server.requests.request_names import AdminPolicyRequestName


def main(url: str, raw: str) -> None:
    asked = json.loads(raw)
    task = sky.Task(run="python train.py", envs=asked.get("envs") or None)
    task.num_nodes = asked.get("num_nodes", 1)
    alternatives = [sky.Resources(**r) for r in asked["resources"]]
    task.set_resources(alternatives[0] if len(alternatives) == 1 else set(alternatives))
    request = UserRequest(
        task=task,
        skypilot_config=sky.Config(),
        request_name=AdminPolicyRequestName(asked.get("request_name", "launch")),
        user=models.User(id="u-1", name=asked.get("user", "alice")),
    )
    try:
        mutated = RestfulAdminPolicy(url).validate_and_mutate(request)
    except exceptions.UserRequestRejectedByPolicy as exc:
        print(json.dumps({"accepted": False, "error": str(exc)}))
        return
    except exceptions.RestfulPolicyError as exc:  # fail-closed: the request fails
        print(json.dumps({"accepted": False, "failed": str(exc)}))
        return
    labels: dict[str, str] = {}
    for resources in mutated.task.resources:
        labels.update(resources.labels or {})
    print(json.dumps({"accepted": True, "labels": labels, "envs": dict(mutated.task.envs)}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
