"""Schemathesis over /openapi.json, in-process, on SQLite and PostgreSQL, as an operator, a
viewer, a job and an agent (of a pod, and of a node): whatever is sent, no 5xx, and every
response's status, content type, headers and body are as the document declares.

Each (database, role) runs on a fresh scene (api_scene.py); path parameters name its rows
(budget, pod, run, extension, plan, a spare token, node), so that requests reach real state
rather than 404. Every operation is run, each with FUZZ_EXAMPLES valid and as many invalid
requests, derandomised (the same requests every run); those that end something in the scene
(close, stop, resume, revoke, withdraw, approve, deny) run after all the others, so that the
others see it whole. A deeper search: GOVERNOR_FUZZ_EXAMPLES=200 pytest this file.
"""

from __future__ import annotations

import os

import hypothesis.strategies as st
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.integration.api_scene import served_scene

FUZZ_EXAMPLES = int(os.environ.get("GOVERNOR_FUZZ_EXAMPLES", "6"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
ENDING = {
    ("POST", "/v1/budgets/{budget_id}/close"),
    ("POST", "/v1/pods/{pod_id}/stop"),
    ("POST", "/v1/pods/{pod_id}/resume"),
    ("POST", "/v1/tokens/{token_id}/revoke"),
    ("DELETE", "/v1/budgets/{budget_id}/plans/{plan_id}"),
    ("POST", "/v1/extensions/{extension_id}/approve"),
    ("POST", "/v1/extensions/{extension_id}/deny"),
}


@pytest.mark.parametrize(
    "role", ["operator", "viewer", "job", "agent of the pod", "agent of the node"]
)
def test_every_response_is_as_declared_and_none_is_a_5xx(database_url: str, role: str) -> None:
    failures: list[str] = []
    with served_scene(database_url) as scene:
        schema = schemathesis.openapi.from_asgi("/openapi.json", scene.app)
        operations = [result.ok() for result in schema.get_all_operations()]
        operations.sort(key=lambda o: (o.method.upper(), o.path) in ENDING)
        headers = {"Authorization": f"Bearer {scene.tokens[role]}"}
        for operation in operations:
            params = {k: v for k, v in scene.params.items() if f"{{{k}}}" in operation.path}
            cases = st.one_of(
                [
                    operation.as_strategy(mode, path_parameters=params)
                    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
                ]
            )

            @given(case=cases)
            @settings(
                max_examples=2 * FUZZ_EXAMPLES,
                derandomize=True,
                database=None,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            )
            def call(case: Case) -> None:
                case.call_and_validate(headers=headers, checks=CHECKS)

            try:
                call()
            except (Exception, BaseExceptionGroup) as error:  # each operation's, all told
                name = f"{operation.method.upper()} {operation.path}"
                failures.append(f"{name}: {type(error).__name__}: {error}")
    assert not failures, "\n\n".join(failures)
