"""`governor plan check` on a plan of several GPU models (preflight-plan/0.2): a memory line
and a cost line per model, and each reason about one model names it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from governor.cli import run_command
from governor.cli.parser import build_parser
from tests.plans import gpu_groups, variant, write


def test_plan_check_prints_a_line_per_gpu_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    today = datetime.now(UTC).date().isoformat()
    doc = variant(
        {
            **gpu_groups(
                {"gpu_type": "H200", "gpu_count": 1, "rate_usd_per_gpu_hour": 4.59},
                {"gpu_type": "A100-40GB", "gpu_count": 1, "rate_usd_per_gpu_hour": 1.29},
            ),
            "hardware.rate_quoted_at": today,
        }
    )
    args = build_parser().parse_args(["plan", "check", str(write(doc, tmp_path / "plan.json"))])
    assert run_command(args) == 2  # no_go
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "NO_GO: pilot-gemma3-lora-001 on 1 x A100-40GB + 1 x H200"
    assert out[1:4] == [
        "memory, per GPU model (the tightest first):",
        "  1 x A100-40GB: 61.6 GiB modeled per GPU of 39.6 GiB usable (156%): no_go",
        "  1 x H200: 61.7 GiB modeled per GPU of 140.4 GiB usable (44%): go",
    ]
    assert "  1 x H200 at $4.59/GPU-hour: $51.87 at max hours" in out
    assert "  1 x A100-40GB at $1.29/GPU-hour: $14.58 at max hours" in out
    fits = [line for line in out if "memory_fit" in line]
    assert fits[0].startswith("  [no_go] memory_fit (A100-40GB): Modeled peak 61.6 GiB")
    assert fits[1].startswith("  [go] memory_fit (H200): Modeled peak 61.7 GiB")
    assert any(line.startswith("  [go] cost_fit: ") for line in out)  # about the whole plan
