"""`governor costs export`: the request it sends, the file it writes as the body arrives, its
progress on stderr, and a refusal said in one line."""

from __future__ import annotations

from pathlib import Path

from governor.cli import costs
from tests.unit.cli.scripted import BUDGET_ID, Governor, budget_out

HEADER = "BilledCost,ChargePeriodStart\r\n"


def test_export_writes_the_servers_csv_to_the_file_named(
    governor: Governor, tmp_path: Path
) -> None:
    governor.has("/v1/budgets", budget_out())
    rows = HEADER + "1.250000,2026-01-01T12:00:00Z\r\n"
    governor.answer("GET", "/v1/costs", rows)
    target = tmp_path / "costs.csv"
    ran = governor.run(
        "costs", "export", "--from", "2026-01-01T00:00:00Z", "--to", "2026-02-01T00:00:00Z",
        "--budget", "pilot", "-o", str(target),
    )  # fmt: skip
    assert ran.code == 0, ran.err
    assert ran.sent[-1] == (
        "GET",
        "/v1/costs?format=focus&file=csv&from=2026-01-01T00%3A00%3A00Z"
        f"&to=2026-02-01T00%3A00%3A00Z&budget_id={BUDGET_ID}",
    )
    assert target.read_bytes() == rows.encode()
    assert ran.out == f"wrote {len(rows)} bytes to {target}\n"


def test_a_long_export_tells_its_progress(governor: Governor, tmp_path: Path) -> None:
    big = HEADER + "1.000000,2026-01-01T12:00:00Z\r\n" * 80_000  # about 2.5 MB
    governor.answer("GET", "/v1/costs", big)
    target = tmp_path / "costs.csv"
    ran = governor.run("costs", "export", "--format", "parquet", "-o", str(target))
    assert ran.code == 0, ran.err
    assert ran.sent == [("GET", "/v1/costs?format=focus&file=parquet")]
    assert target.stat().st_size == len(big)
    told = ran.err.splitlines()
    assert len(told) == len(big) // costs.PROGRESS_EVERY
    assert told[0].startswith("governor: 1.0 MiB received")


def test_a_refused_export_says_why_and_writes_nothing_more(
    governor: Governor, tmp_path: Path
) -> None:
    message = "`to` must be later than `from`"
    governor.answer(
        "GET", "/v1/costs", {"error": {"code": "invalid", "message": message}}, status=422
    )
    target = tmp_path / "costs.csv"
    ran = governor.run("costs", "export", "--from", "2026-02-01T00:00:00Z", "-o", str(target))
    assert ran.code == 1
    assert message in ran.err and "422" in ran.err
    assert target.read_bytes() == b""
