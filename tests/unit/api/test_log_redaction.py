"""The access log never carries a gate token: its path is written with `***` in its place."""

from __future__ import annotations

import logging

from governor.api.log_redaction import RedactGateTokens


def line(*args: object) -> str:
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s"', args, None
    )
    RedactGateTokens().filter(record)
    return record.getMessage()


def test_a_gate_token_in_the_path_is_replaced() -> None:
    said = line(
        "10.0.0.1:5000", "POST", "/v1/gates/gov_gate_s3cr3t/dstack/apply_policies/on_run_apply"
    )
    assert "s3cr3t" not in said
    assert said.endswith('"POST /v1/gates/***/dstack/apply_policies/on_run_apply"')


def test_other_paths_are_left_as_they_are() -> None:
    assert line("10.0.0.1:5000", "GET", "/v1/budgets?name=x").endswith('"GET /v1/budgets?name=x"')
