"""The server benchmarks, run end to end at a tiny size (--quick) on each database.

Each script starts the real server in its own process and drives it over HTTP. What is
checked is that it finishes (exit 0), prints one JSON line per measurement with the fields
its readers use, counted something and met no error, and leaves no database behind. No
timing is asserted: the machine running the tests may be busy with anything.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.bench.scripts import DATABASES, run_script

pytestmark = pytest.mark.e2e


def by_measure(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        grouped.setdefault(record["measure"], []).append(record)
    return grouped


def assert_clean(record: dict[str, Any], *prefixes: str) -> None:
    """Every request of the measurement succeeded and was counted."""
    for prefix in ("", *prefixes):
        assert record[f"{prefix}count"] > 0, record
        assert record[f"{prefix}errors"] == 0, record
        assert record[f"{prefix}error_kinds"] == {}, record
        assert 0 < record[f"{prefix}p50_ms"] <= record[f"{prefix}p99_ms"], record


@pytest.mark.parametrize("db", DATABASES)
def test_heartbeats_benchmark(db: str) -> None:
    records = run_script("heartbeats.py", db, "--quick")
    assert {(r["bench"], r["db"]) for r in records} == {("heartbeats", db)}
    measures = by_measure(records)
    assert set(measures) == {"sequential", "closed_loop", "open_loop"}

    sequential = measures["sequential"]
    assert [r["pods_in_budget"] for r in sequential] == [1, 10]
    for record in sequential:
        assert_clean(record, "healthz_")
        assert record["mean_ms"] > 0 and record["ratio_p50"] > 0 and record["vs_first_p50"] > 0
    assert sequential[0]["vs_first_p50"] == 1.0

    (closed,) = measures["closed_loop"]
    assert_clean(closed, "healthz_")
    assert closed["jobs"] == 10
    assert closed["heartbeats_per_s"] > 0 and closed["healthz_per_s"] > 0
    assert closed["ratio"] > 0 and closed["p99_ratio"] > 0

    (open_loop,) = measures["open_loop"]
    assert_clean(open_loop)
    assert open_loop["jobs"] == 20
    assert open_loop["count"] == open_loop["scheduled"] > 0
    assert open_loop["offered_per_s"] > 0 and open_loop["achieved_per_s"] > 0
    assert open_loop["max_ms"] >= open_loop["p99_ms"]


def test_heartbeats_benchmark_with_the_passes_on_another_replica() -> None:
    records = run_script(
        "heartbeats.py", "postgres", "--quick", "--measures", "open", "--passes-apart"
    )
    (open_loop,) = records
    assert open_loop["measure"] == "open_loop" and open_loop["passes_apart"] is True
    assert_clean(open_loop)
    assert open_loop["count"] == open_loop["scheduled"] > 0


@pytest.mark.parametrize("db", DATABASES)
def test_footprint_benchmark(db: str) -> None:
    records = run_script("footprint.py", db, "--quick")
    assert {(r["bench"], r["db"]) for r in records} == {("footprint", db)}
    measures = by_measure(records)
    assert list(measures) == ["idle", "after_setup", "heartbeats", "after_heartbeats"]
    for name in ("idle", "after_setup", "after_heartbeats"):
        (reading,) = measures[name]
        assert 0 < reading["rss_mib"] <= reading["peak_mib"], reading
        assert isinstance(reading["settled"], bool)
    (beats,) = measures["heartbeats"]
    assert beats["heartbeats"] == beats["jobs"] * beats["beats_per_job"] > 0, beats
    assert beats["errors"] == 0 and beats["error_kinds"] == {}, beats
    assert beats["heartbeats_per_s"] > 0
    (after,) = measures["after_heartbeats"]
    assert after["growth_mib"] == pytest.approx(after["rss_mib"] - measures["idle"][0]["rss_mib"])


@pytest.mark.postgres
def test_takeover_benchmark() -> None:
    records = run_script("takeover.py", "postgres", "--quick")
    assert [r["way"] for r in records] == ["sigterm", "sigkill", "sigstop"]
    for record in records:
        assert record["bench"] == "takeover" and record["from"] != record["to"], record
        assert record["takeover_s"] > 0 and record["bound_s"] > 0 and record["ratio"] > 0
    assert [r["term"] for r in records] == sorted({r["term"] for r in records})


def test_footprint_worst_input_benchmark() -> None:
    records = run_script("footprint.py", "sqlite", "--worst-input", "--quick")
    assert {(r["bench"], r["db"]) for r in records} == {("footprint_worst_input", "sqlite")}
    measures = by_measure(records)
    readers = ["report_json", "report_md", "report_html", "events_pages"]
    assert list(measures) == ["idle", "filled", *readers]
    (filled,) = measures["filled"]
    assert filled["events"] == 10 * 5  # --quick: 10 jobs, 5 events each, none refused
    for name in readers:
        (read,) = measures[name]
        assert 0 < read["rss_mib"] <= read["peak_mib"] and read["response_mib"] > 0, read


@pytest.mark.parametrize("db", DATABASES)
def test_gate_benchmark(db: str) -> None:
    [record] = run_script("gate.py", db, "--quick")
    assert (record["bench"], record["db"], record["pods"], record["budgets"]) == (
        "gate",
        db,
        100,
        10,
    )
    for name in ("gate", "healthz"):
        assert 0 < record[f"{name}_p50_ms"] <= record[f"{name}_p99_ms"], record
    assert record["p50_ratio"] > 0 and isinstance(record["goal_met"], bool)
