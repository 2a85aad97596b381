"""Nothing a team's caller sends confirms another team's object, on SQLite and PostgreSQL: for
every list filtered by a budget, pod or team (`?budget_id=`, `?pod_id=`, `?team=`) and every
request whose body names a budget's pod, plan, launch or a team, another team's id and an id
that names nothing get the same answer, status and body alike but for the id sent: 404, not an
empty list or an error that names the other team's object.
"""

from __future__ import annotations

from typing import Any

from tests.integration.test_team_role_matrix import _scene
from tests.plans import variant

# (what is asked, method, path, body): `{id}` is the other team's object, or one that does not
# exist; `{budget}` is the caller's own budget
ASKED: list[tuple[str, str, str, str, Any]] = [
    ("budget", "events of a budget", "GET", "/v1/events?budget_id={id}", None),
    ("budget", "pods of a budget", "GET", "/v1/pods?budget_id={id}", None),
    ("budget", "runs of a budget", "GET", "/v1/runs?budget_id={id}", None),
    ("budget", "extensions of a budget", "GET", "/v1/extensions?budget_id={id}", None),
    ("budget", "costs of a budget", "GET", "/v1/costs?budget_id={id}", None),
    ("team", "costs of a team", "GET", "/v1/costs?team={id}", None),
    ("team", "status of a team", "GET", "/v1/status?team={id}", None),
    ("pod", "a plan judged on a pod", "POST", "/v1/budgets/{budget}/plans?pod_id={id}", "plan"),
    (
        "launch",
        "a pod registered as a launch's",
        "POST",
        "/v1/budgets/{budget}/pods",
        {"provider": "fake", "provider_ref": "pod-new", "launch": "{id}"},
    ),
    (
        "plan",
        "a pod registered under a plan",
        "POST",
        "/v1/budgets/{budget}/pods",
        {"provider": "fake", "provider_ref": "pod-new", "plan_id": "{id}"},
    ),
    (
        "pod",
        "a run on a pod",
        "POST",
        "/v1/budgets/{budget}/runs",
        {"name": "leak", "pod_id": "{id}"},
    ),
    ("pod", "an agent token for a pod", "POST", "/v1/tokens", {"role": "agent", "pod_id": "{id}"}),
    ("team", "a token for a team", "POST", "/v1/tokens", {"role": "viewer", "teams": ["{id}"]}),
    (
        "team",
        "a budget in a team",
        "POST",
        "/v1/budgets",
        {"name": "leak", "ceiling_usd": "10", "team": "{id}"},
    ),
]
NOTHING = {  # ids of the same shape that name nothing
    "budget": "bud_00000000000000ff",
    "team": "team_00000000000000ff",
    "pod": "pod_00000000000000ff",
    "plan": "plan_00000000000000ff",
    "launch": "lch_00000000000000ff",
}


def _filled(body: Any, key: str) -> Any:
    if isinstance(body, str):
        return body.replace("{id}", key)
    if isinstance(body, list):
        return [_filled(b, key) for b in body]
    if isinstance(body, dict):
        return {k: _filled(v, key) for k, v in body.items()}
    return body


def test_another_teams_id_is_answered_as_one_that_does_not_exist(database_url: str) -> None:
    with _scene(database_url) as (client, params, callers):
        beta = {kind: params[f"beta_{kind}_id"] for kind in NOTHING}
        differ: list[str] = []
        for kind, what, method, path, body in ASKED:
            # a viewer reads the lists too; a job of the budget judges its plans
            callers_of = ["alpha operator", *(["alpha viewer"] if method == "GET" else [])]
            for caller in [*callers_of, *(["alpha job"] if "/plans" in path else [])]:
                answers = []
                for key in (beta[kind], NOTHING[kind]):
                    url = path.format(id=key, budget=params["budget_id"])
                    sent = variant() if body == "plan" else _filled(body, key)
                    response = client.request(
                        method,
                        url,
                        json=sent,
                        headers={"Authorization": f"Bearer {callers[caller]}"},
                    )
                    answers.append((response.status_code, response.text.replace(key, "<id>")))
                theirs, nothing = answers
                if theirs != nothing or theirs[0] != 404:
                    differ.append(f"{what} as {caller}: {theirs} but {nothing}")
    assert not differ, "\n".join(differ)
