"""The in-process fleet benchmarks, run once each at a tiny size.

bench/enforce_scale.py and bench/pass_tail.py on SQLite and PostgreSQL, bench/overshoot.py on
SQLite. Checked: exit 0, one JSON line per measurement with the fields its readers use, sane
values, no database left behind; and what the simulation shows about the governor itself: a
fleet far from its ceilings is never stopped, no pilot whose provider keeps its declared
stop latency (and never fails a stop) is billed a cent past its ceiling, and none of the
quick run's pilots is once its provider has made five stops (the stop latency is learned),
slow or failing providers included. No timing is asserted.
"""

from __future__ import annotations

import pytest

from governor.cli.serve import SWITCH_INTERVAL_S
from governor.scheduler.tasks import TASKS
from tests.bench.scripts import DATABASES, run_script

SIZES = (10, 30)
REPEATS = 2
QUICK_PILOTS = 20


@pytest.mark.parametrize("db", DATABASES)
def test_enforce_scale_times_every_task_at_each_size(db: str) -> None:
    sizes = ",".join(str(n) for n in SIZES)
    records = run_script("enforce_scale.py", db, "--pods", sizes, "--repeats", str(REPEATS))
    assert {r["bench"] for r in records} == {"enforce_scale"}
    assert {r["db"] for r in records} == {db}
    timed = [r for r in records if r["task"] != "ledger_rows"]
    expected = {(task, n) for task in ["heartbeat", *TASKS, "accrue_hour"] for n in SIZES}
    assert {(r["task"], r["pods"]) for r in timed} == expected
    assert len(timed) == len(expected)
    for r in timed:
        assert r["runs"] == (1 if r["task"] == "accrue_hour" else REPEATS)
        assert r["best_s"] >= 0
        growth = r["growth_per_x10"]
        if r["pods"] == SIZES[0]:
            assert growth is None
        else:
            assert growth is None or growth > 0
    for r in timed:
        if r["task"] == "accrue_hour":  # tiny fleets close their hour in one pass
            assert r["passes_to_close"] == 1 and r["close_total_s"] == r["best_s"]
    beats = [r for r in timed if r["task"] == "heartbeat"]
    assert all(r["calls"] == r["pods"] and r["per_call_s"] > 0 for r in beats)

    ledger = {r["pods"]: r for r in records if r["task"] == "ledger_rows"}
    assert sorted(ledger) == list(SIZES)
    for n, r in ledger.items():
        passes = REPEATS + 1  # and the one at the top of the hour
        assert r["accrue_passes"] == passes
        assert r["rows"] >= r["rows_added"] >= 0
        assert r["rows_per_pod_per_pass"] == pytest.approx(r["rows_added"] / n / passes, abs=1e-3)
        assert r["stop_orders"] == 0  # ceilings out of reach, every run heard from: nothing stops


@pytest.mark.parametrize("db", DATABASES)
def test_pass_tail_times_the_beats_that_come_while_passes_run(db: str) -> None:
    records = run_script("pass_tail.py", db, "--quick")
    # the server's switch interval first, then CPython's own as the baseline
    assert [r["switch_interval_s"] for r in records] == [SWITCH_INTERVAL_S, 0.005]
    for record in records:
        assert (record["bench"], record["db"], record["pods"]) == ("pass_tail", db, 20)
        assert record["beats"] > 0 and record["passes"] >= 1 and record["pass_mean_s"] > 0
        times = [record[k] for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms")]
        assert times[0] > 0 and times == sorted(times)
    server, baseline = records
    assert server["p99_vs_cpython"] == round(server["p99_ms"] / baseline["p99_ms"], 3)


def test_overshoot_is_nil_wherever_the_provider_keeps_its_word() -> None:
    records = run_script("overshoot.py", "sqlite", "--quick")
    assert {r["bench"] for r in records} == {"overshoot"}
    causes = {(r["policy"], r["cause"]): r for r in records if r["record"] == "cause"}
    policies = {r["policy"]: r for r in records if r["record"] == "policy"}
    assert set(policies) == {"governor", "lagged_bill"}
    cause_names = {"none", "stop failed and retried", "provider stop slower than declared"}
    assert set(causes) == {(p, c) for p in policies for c in cause_names}
    for policy, record in policies.items():
        assert record["pilots"] == QUICK_PILOTS
        assert record["never_stopped"] == 0
        assert sum(causes[policy, c]["pilots"] for c in cause_names) == QUICK_PILOTS
        for r in (record, *(causes[policy, c] for c in cause_names)):
            assert 0 <= r["overshooting"] <= r["pilots"]
            assert r["total_overshoot_usd"] >= r["max_overshoot_usd"] >= 0
            assert (r["overshooting"] == 0) == (r["total_overshoot_usd"] == 0)

    governor = policies["governor"]
    assert sum(governor["stopped_by"].values()) == QUICK_PILOTS
    assert governor["metered_below_billed"] == 0  # the meter never counts less than the bill
    kept_word = causes["governor", "none"]
    assert kept_word["pilots"] > 0
    assert kept_word["overshooting"] == 0
    assert kept_word["total_overshoot_usd"] == 0.0
    assert kept_word["min_headroom_s"] >= 0
    phases = {(r["policy"], r["cause"], r["phase"]): r for r in records if r["record"] == "phase"}
    phase_names = {"during warm-up", "after warm-up"}
    assert set(phases) == {(p, c, f) for p in policies for c in cause_names for f in phase_names}
    for (policy, cause, _), r in phases.items():
        assert r["pilots"] <= causes[policy, cause]["pilots"]
        assert (r["median_unspent_usd"] is None) == (r["pilots"] == 0)
    for cause in cause_names:  # the quick run has a provider of each kind
        learned = phases["governor", cause, "after warm-up"]
        assert learned["pilots"] > 0
        assert learned["total_overshoot_usd"] == 0.0
    # Acting on bills that lag: every pilot is billed past its ceiling.
    baseline = policies["lagged_bill"]
    assert baseline["overshooting"] == baseline["pilots"]
