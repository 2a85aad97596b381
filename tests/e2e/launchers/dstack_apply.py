"""dstack's built-in REST plugin judging a run spec at the governor, as dstack's server does
at plan and apply time. Run by the dstack virtualenv's interpreter, with
DSTACK_PLUGIN_SERVICE_URI set to the governor's dstack gate:

    python dstack_apply.py USER PROJECT CONFIGURATION_JSON [TIMES]

It applies the spec TIMES times (dstack asks at plan time, then at apply time) and prints the
last answer: {"accepted", "error", "tags", "env", "max_duration", "max_price"} as JSON.
"""

from __future__ import annotations

import json
import sys

from dstack._internal.core.errors import ServerClientError
from dstack._internal.core.models.runs import RunSpec
from dstack.plugins.builtin.rest_plugin._plugin import CustomApplyPolicy


def main(user: str, project: str, configuration: str, times: int) -> None:
    spec = RunSpec.model_validate(
        {"configuration": json.loads(configuration), "ssh_key_pub": "ssh-ed25519 AAAA test"}
    )
    policy = CustomApplyPolicy()
    answer: dict[str, object] = {}
    for _ in range(times):
        try:
            applied = policy.on_apply(user=user, project=project, spec=spec)
        except ServerClientError as exc:
            answer = {"accepted": False, "error": str(exc)}
            continue
        conf = applied.configuration
        answer = {
            "accepted": True,
            "tags": dict(conf.tags or {}),
            "env": dict(conf.env.as_dict() if hasattr(conf.env, "as_dict") else conf.env),
            "max_duration": conf.max_duration,
            "max_price": conf.max_price,
        }
    print(json.dumps(answer, default=str))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 2)
