"""bench/billing_reads.py, run once at a tiny size against the fake clouds over HTTP.

Checked: exit 0, one JSON line per provider and size with the fields its readers use, and what
it shows about the adapters: the account's bill is read in one request (a page of charges,
for Vast, per 500) however many pods are asked about, where the baseline sends one a pod. No
timing is asserted.
"""

from __future__ import annotations

from tests.bench.scripts import run_plain

SIZES = (3, 12)  # --quick's


def test_billing_reads_compares_the_account_at_once_with_a_call_per_pod() -> None:
    records = run_plain("billing_reads.py", "--quick")
    assert [(r["provider"], r["pods"]) for r in records] == [
        (provider, n) for provider in ("runpod", "vast") for n in SIZES
    ]
    for r in records:
        assert r["bench"] == "billing_reads" and r["hours"] == 2
        assert r["per_pod_requests"] == r["pods"] and r["account_requests"] == 1
        assert r["requests_ratio"] == round(1 / r["pods"], 5)
        assert r["per_pod_bytes"] > 0 and r["account_bytes"] > 0
        assert r["per_pod_s"] > 0 and r["account_s"] > 0 and r["seconds_ratio"] > 0
