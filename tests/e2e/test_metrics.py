"""GET /metrics on a real server: Prometheus text that prometheus_client's own parser reads,
with the right series and values for a pilot (budget, pod, run, extension, stop); open by
default, for viewers only when GOVERNOR_METRICS_REQUIRE_TOKEN is set."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from governor.domain.stop_order import StopState
from tests.e2e.conftest import (
    OPERATOR_TOKEN,
    RATE_USD_PER_HOUR,
    GovernorServer,
    ServerFactory,
    assert_error,
    budget_events,
    get_budget,
    http_client,
    ok,
    parse_time,
    utcnow,
)
from tests.e2e.pilot import CEILING_USD, EXTENSION_USD, GPU, pilot

pytestmark = pytest.mark.e2e

Series = dict[str, dict[tuple[tuple[str, str], ...], float]]


def scrape(client: httpx.Client) -> Series:
    """Every sample by name, then by its labels; parsed by prometheus_client."""
    response = client.get("/metrics")
    assert response.status_code == 200, response.text[:500]
    assert response.headers["content-type"].startswith("text/plain; version=")
    series: Series = {}
    for family in text_string_to_metric_families(response.text):
        assert family.name.startswith("governor_"), family.name
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.items()))
            series.setdefault(sample.name, {})[labels] = sample.value
    return series


def one(series: Series, metric: str, /, **labels: str) -> float:
    """The value of the one sample of `metric` whose labels include `labels`."""
    found = [v for k, v in series.get(metric, {}).items() if set(labels.items()) <= set(k)]
    assert len(found) == 1, f"{metric}{labels}: {found} in {series.get(metric)}"
    return found[0]


def test_metrics_carry_the_pilot_as_it_runs_and_after_its_stop(server: GovernorServer) -> None:
    with server.client() as operator, http_client(server.url) as anyone:
        p = pilot(server, operator).start()
        budget, pod, run = p.budget_id, p.pod_id, p.run_id

        m = scrape(anyone)  # open: no token needed by default
        assert one(m, "governor_pod_state", pod=pod, budget=budget, state="running") == 1
        assert one(m, "governor_pod_state", pod=pod, state="stopped") == 0
        assert one(m, "governor_pod_rate_dollars_per_hour", pod=pod) == float(RATE_USD_PER_HOUR)
        assert one(m, "governor_budget_burn_rate_dollars_per_hour", budget=budget) == float(
            RATE_USD_PER_HOUR
        )
        assert 0 <= one(m, "governor_run_heartbeat_age_seconds", run=run, pod=pod) < 5
        assert one(m, "governor_budget_spent_dollars", budget=budget) > 0
        gpu = {"uuid": GPU["uuid"], "pod": pod}
        assert one(m, "governor_gpu_info", **gpu, index="0", name=GPU["name"]) == 1
        assert one(m, "governor_gpu_utilization_ratio", **gpu) == 0.875
        assert one(m, "governor_gpu_memory_used_bytes", **gpu) == GPU["memory_used_bytes"]
        assert one(m, "governor_gpu_memory_total_bytes", **gpu) == GPU["memory_total_bytes"]
        assert one(m, "governor_gpu_power_watts", **gpu) == 612.5
        assert one(m, "governor_gpu_temperature_celsius", **gpu) == 61.0

        p.finish(operator)
        m = scrape(anyone)
        figures = get_budget(operator, budget)  # the pod bills nothing now: figures hold still
        b = {"budget": budget, "budget_name": figures["name"]}
        assert one(m, "governor_budget_ceiling_dollars", **b) == float(CEILING_USD)
        effective = Decimal(CEILING_USD) + Decimal(EXTENSION_USD)
        assert one(m, "governor_budget_effective_ceiling_dollars", **b) == float(effective)
        for name, field in (
            ("spent", "spent_usd"),
            ("shutdown", "shutdown_usd"),
            ("storage_tail", "storage_tail_usd"),
            ("reserve", "reserve_usd"),
            ("committed", "committed_usd"),
            ("held_for_plans", "held_for_plans_usd"),
            ("remaining", "remaining_usd"),
        ):
            assert one(m, f"governor_budget_{name}_dollars", **b) == float(figures[field]), name
        parts = ("spent_usd", "shutdown_usd", "storage_tail_usd", "reserve_usd")
        assert sum(Decimal(figures[k]) for k in parts) == Decimal(figures["committed_usd"])
        assert one(m, "governor_budget_burn_rate_dollars_per_hour", **b) == 0
        assert one(m, "governor_budget_state", **b, state="open") == 1
        assert one(m, "governor_extensions", budget=budget, state="approved") == 1
        assert one(m, "governor_pod_state", pod=pod, state="stopped") == 1
        assert one(m, "governor_pod_spent_dollars", pod=pod) == float(figures["spent_usd"])
        stops = {dict(k)["state"]: v for k, v in m["governor_stop_orders"].items()}
        assert stops == {s: float(s == "stopped") for s in stops} and len(stops) == len(StopState)
        assert "governor_gpu_utilization_ratio" not in m  # no GPU of a stopped pod

        # The run ended with its pod: it has left the heartbeat-age series, so no "heartbeat
        # lost" alert fires after a stop.
        assert p.job.last_beat_at is not None
        assert all(dict(k)["run"] != run for k in m.get("governor_run_heartbeat_age_seconds", {}))

        log = budget_events(operator, budget)
        by_severity = Counter(e["severity"] for e in log)
        for severity in ("info", "warning", "critical"):
            counted = sum(
                v for k, v in m["governor_events_total"].items() if dict(k)["severity"] == severity
            )
            assert counted == by_severity[severity], severity
        harness = one(
            m, "governor_events_total", severity="warning", category="harness", budget=budget
        )
        assert harness == 1  # the failure the job reported
        assert all(parse_time(e["at"]) <= utcnow() for e in log)


def test_metrics_can_be_for_viewers_only(start_server: ServerFactory) -> None:
    server = start_server(GOVERNOR_METRICS_REQUIRE_TOKEN="true")
    with http_client(server.url) as anyone:
        assert_error(anyone.get("/metrics"), 401)
    with http_client(server.url, "not-a-token") as stranger:
        assert_error(stranger.get("/metrics"), 401)
    with server.client() as operator:
        viewer = ok(operator.post("/v1/tokens", json={"role": "viewer"}), 201)["token"]
        p = pilot(server, operator)
    with http_client(server.url, p.job.token) as job:
        assert_error(job.get("/metrics"), 403)
    for token in (viewer, OPERATOR_TOKEN):
        with http_client(server.url, token) as client:
            assert "governor_budget_spent_dollars" in scrape(client)
