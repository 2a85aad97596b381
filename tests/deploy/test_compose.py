"""deploy/compose: the Compose file against the Compose Specification's JSON schema, and the
facts a user relies on when running it.

compose-spec.json beside this file is the specification's own schema, vendored unchanged so
the check runs offline: repository compose-spec/compose-spec, file schema/compose-spec.json,
commit 00655e2222608fa6eaecdf12ac5195889ca2244a. It declares draft-07 and is read as such.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_DIR = ROOT / "deploy" / "compose"
REPLICAS = ("governor-1", "governor-2")


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return _yaml(COMPOSE_DIR / "compose.yaml")


def test_the_vendored_schema_is_the_compose_specification() -> None:
    schema = json.loads((Path(__file__).parent / "compose-spec.json").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    assert schema["title"] == "Compose Specification"
    assert "service_completed_successfully" in json.dumps(schema["definitions"]["service"])


def test_compose_file_is_valid_under_the_specification(compose: dict[str, Any]) -> None:
    schema = json.loads((Path(__file__).parent / "compose-spec.json").read_text(encoding="utf-8"))
    errors = sorted(
        jsonschema.Draft7Validator(schema).iter_errors(compose), key=lambda e: list(e.path)
    )
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_two_replicas_built_from_the_repository_start_after_migrate(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    assert services["migrate"]["command"] == ["governor", "migrate"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "healthcheck" in services["postgres"]
    assert any(v.startswith("postgres-data:") for v in services["postgres"]["volumes"])
    governors = [name for name, s in services.items() if "build" in s and name != "migrate"]
    assert sorted(governors) == list(REPLICAS)
    names = set()
    for name in REPLICAS:
        service = services[name]
        assert (COMPOSE_DIR / service["build"]["context"]).resolve() == ROOT
        assert (ROOT / "Dockerfile").is_file()
        condition = service["depends_on"]["migrate"]["condition"]
        assert condition == "service_completed_successfully"
        env = service["environment"]
        assert env["GOVERNOR_DATABASE_URL"].startswith("postgresql://")
        assert "@postgres:5432/" in env["GOVERNOR_DATABASE_URL"]
        assert env["GOVERNOR_OPERATOR_TOKEN"].startswith("${GOVERNOR_OPERATOR_TOKEN:?")
        names.add(env["GOVERNOR_REPLICA_ID"])
    assert len(names) == len(REPLICAS), "each replica needs its own GOVERNOR_REPLICA_ID"


def test_the_load_balancer_spreads_over_both_replicas(compose: dict[str, Any]) -> None:
    nginx = compose["services"]["nginx"]
    assert nginx["image"].startswith("nginx:")
    conf = (COMPOSE_DIR / "nginx.conf").read_text(encoding="utf-8")
    for name in REPLICAS:
        assert f"server {name}:8000" in conf
    assert "max_fails=" in conf, "passive health: a failing replica is left out for a while"
    assert "least_conn" not in conf and "ip_hash" not in conf, "round robin, nginx's default"


def test_prometheus_scrapes_each_replica_and_loads_the_rules(compose: dict[str, Any]) -> None:
    mounts = _mounts(compose["services"]["prometheus"])
    config = _yaml(mounts["/etc/prometheus/prometheus.yml"])
    targets = [
        target
        for job in config["scrape_configs"]
        for static in job.get("static_configs", [])
        for target in static["targets"]
    ]
    assert sorted(targets) == [f"{name}:8000" for name in REPLICAS]
    (job,) = config["scrape_configs"]
    alerts = (ROOT / "deploy" / "prometheus" / "alerts.yml").read_text(encoding="utf-8")
    assert f'up{{job="{job["job_name"]}"}}' in alerts, "the replica-down rule matches this job"
    rule_files = config["rule_files"]
    assert rule_files == ["/etc/prometheus/alerts.yml"]
    assert mounts["/etc/prometheus/alerts.yml"] == ROOT / "deploy" / "prometheus" / "alerts.yml"


def test_grafana_is_provisioned_with_prometheus_and_the_dashboard(
    compose: dict[str, Any],
) -> None:
    mounts = _mounts(compose["services"]["grafana"])
    provisioning = mounts["/etc/grafana/provisioning"]
    (source,) = _yaml(provisioning / "datasources" / "prometheus.yml")["datasources"]
    assert source["type"] == "prometheus"
    assert source["url"] == "http://prometheus:9090"
    assert source["isDefault"] is True
    (provider,) = _yaml(provisioning / "dashboards" / "governor.yml")["providers"]
    folder = provider["options"]["path"]
    dashboards = {target: path for target, path in mounts.items() if target.startswith(folder)}
    assert list(dashboards.values()) == [ROOT / "deploy" / "grafana" / "governor-dashboard.json"]
    assert json.loads(next(iter(dashboards.values())).read_text(encoding="utf-8"))["uid"]


def test_every_file_the_compose_file_mounts_exists(compose: dict[str, Any]) -> None:
    for service in compose["services"].values():
        for target, path in _mounts(service).items():
            assert path.exists(), f"{target} comes from {path}, which is missing"


def _mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Bind mounts (short syntax, relative sources): container path -> host path."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target, *_ = volume.split(":")
        if source.startswith("."):
            mounts[target] = (COMPOSE_DIR / source).resolve()
    return mounts
