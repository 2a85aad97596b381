"""deploy/kubernetes: every document validated against the Kubernetes API's own schemas
(bundled by kubernetes-validate, so offline; strict: unknown fields are errors), and the facts
the replica model depends on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from governor.adapters.providers.kubernetes import API
from governor.settings import load_settings
from tests.contract import kueue_schemas

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
KUBERNETES_VERSION = "1.33.0"


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def _one(kind: str) -> dict[str, Any]:
    (found,) = [
        d for d in _documents(ROOT / "deploy/kubernetes/governor.yaml") if d["kind"] == kind
    ]
    return found


def test_there_are_manifests() -> None:
    assert ROOT / "deploy/kubernetes/governor.yaml" in MANIFESTS


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_document_is_valid_for_the_kubernetes_api(path: Path) -> None:
    documents = _documents(path)
    assert documents
    for document in documents:
        if document["apiVersion"].startswith("kueue.x-k8s.io/"):  # Kueue's CRD, vendored
            assert document["apiVersion"] == f"kueue.x-k8s.io/{kueue_schemas.VERSION}"
            assert kueue_schemas.problems(document["kind"], document) == []
            continue
        try:
            kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{path.name}: {document['kind']} {where}: {exc.message}")


def test_two_replicas_roll_without_going_below_two() -> None:
    spec = _one("Deployment")["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }


def test_probes_migrations_and_replica_name() -> None:
    pod = _one("Deployment")["spec"]["template"]["spec"]
    (governor,) = pod["containers"]
    assert governor["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert governor["livenessProbe"]["httpGet"]["path"] == "/healthz"
    (migrate,) = pod["initContainers"]
    assert migrate["command"] == ["governor", "migrate"]
    assert migrate["image"] == governor["image"]
    env = {e["name"]: e for e in governor["env"]}
    field = env["GOVERNOR_REPLICA_ID"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert field == "metadata.name"
    assert env["GOVERNOR_SESSION_SECRET"]["valueFrom"]["secretKeyRef"]["optional"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    for container in (governor, migrate):
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_the_disruption_budget_and_service_select_the_deployments_pods() -> None:
    deployment = _one("Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    pdb = _one("PodDisruptionBudget")["spec"]
    assert pdb["minAvailable"] == 1
    assert pdb["selector"]["matchLabels"]
    assert pdb["selector"]["matchLabels"].items() <= labels.items()
    service = _one("Service")["spec"]
    assert service["selector"].items() <= labels.items()
    (port,) = service["ports"]
    assert port["targetPort"] == "http"


def test_the_provider_account_is_kept() -> None:
    pod = _one("Deployment")["spec"]["template"]["spec"]
    assert _one("ServiceAccount")["metadata"]["name"] == pod["serviceAccountName"]
    binding = _one("ClusterRoleBinding")
    assert binding["roleRef"]["name"] == _one("ClusterRole")["metadata"]["name"]
    assert binding["subjects"][0]["name"] == pod["serviceAccountName"]


def test_the_ingress_example_routes_to_the_service() -> None:
    (ingress,) = _documents(ROOT / "deploy/kubernetes/ingress.example.yaml")
    (rule,) = ingress["spec"]["rules"]
    (path,) = rule["http"]["paths"]
    backend = path["backend"]["service"]
    assert backend["name"] == _one("Service")["metadata"]["name"]
    assert backend["port"]["name"] == _one("Service")["spec"]["ports"][0]["name"]
    assert rule["host"] in ingress["spec"]["tls"][0]["hosts"]


def test_the_agent_runs_on_every_gpu_node_as_that_node() -> None:
    (daemonset,) = _documents(ROOT / "deploy/kubernetes/agent.yaml")
    assert daemonset["kind"] == "DaemonSet"
    pod = daemonset["spec"]["template"]["spec"]
    (agent,) = pod["containers"]
    assert (
        agent["image"] == _one("Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    )
    args = agent["args"]
    assert args[:2] == ["governor", "agent"]
    assert args[args.index("--node") + 1] == "$(NODE_NAME)"
    env = {e["name"]: e for e in agent["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"  # every GPU, none requested
    assert "resources" not in agent or "nvidia.com/gpu" not in str(agent["resources"])
    # Its own token, bound to its node, from the Secret holding one key per node.
    token_file = args[args.index("--token-file") + 1]
    (mount,) = agent["volumeMounts"]
    assert token_file == f"{mount['mountPath']}/$(NODE_NAME)"
    (volume,) = pod["volumes"]
    assert volume["name"] == mount["name"] and volume["secret"]["secretName"]
    # It reports to the server's Service.
    server = args[args.index("--server") + 1]
    service = _one("Service")
    assert server == f"http://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}"


def test_the_alert_rules_ship_as_a_config_map_holding_the_rule_file_unchanged() -> None:
    (config_map,) = _documents(ROOT / "deploy/kubernetes/prometheus-rules.yaml")
    assert config_map["kind"] == "ConfigMap"
    rules = (ROOT / "deploy/prometheus/alerts.yml").read_text(encoding="utf-8")
    assert config_map["data"] == {"alerts.yml": rules}


def _secret_readable(pod: dict[str, Any], volume: dict[str, Any]) -> bool:
    """Whether the pod's non-root user can read the files of a Secret volume, as the kubelet
    lays them out: owned by root, group-owned by the pod's fsGroup when it has one (which its
    processes then hold as a supplementary group), with the volume's defaultMode (0644 when
    unset)."""
    mode = volume["secret"].get("defaultMode", 0o644)
    others = bool(mode & 0o004)
    group = bool(mode & 0o040) and pod.get("securityContext", {}).get("fsGroup") is not None
    return others or group


def test_each_secret_a_workload_mounts_is_readable_by_the_user_it_runs_as() -> None:
    workloads = [
        d
        for path in MANIFESTS
        for d in _documents(path)
        if d["kind"] in {"Deployment", "DaemonSet", "StatefulSet"}
    ]
    mounted = 0
    for workload in workloads:
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsUser"] != 0, workload["metadata"]["name"]
        for volume in pod.get("volumes", []):
            if "secret" in volume:
                mounted += 1
                assert _secret_readable(pod, volume), (
                    f"{workload['metadata']['name']}: its user cannot read Secret volume "
                    f"{volume['name']!r} (mode {volume['secret'].get('defaultMode', 0o644):o})"
                )
    assert mounted, "no workload mounts a Secret: this test checks nothing"


def test_the_readability_rule_refuses_a_root_only_secret() -> None:
    pod = {"securityContext": {"runAsUser": 10001}}
    assert not _secret_readable(pod, {"secret": {"defaultMode": 0o400}})
    assert not _secret_readable(pod, {"secret": {"defaultMode": 0o440}})  # no fsGroup
    grouped = {"securityContext": {"runAsUser": 10001, "fsGroup": 10001}}
    assert _secret_readable(grouped, {"secret": {"defaultMode": 0o440}})
    assert _secret_readable(pod, {"secret": {}})  # 0644


def test_the_cluster_role_grants_what_the_adapter_calls_on_each_kind() -> None:
    """get, list and patch on every kind a ref may name (a scaled kind's scale subresource
    patched too), read from the adapter's own table: a kind added there without its rule
    fails here. Nothing more: no delete, no create."""
    granted = {
        (group, resource, verb)
        for rule in _one("ClusterRole")["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    needed = set()
    for kind in API.values():
        group = kind.version.rpartition("/")[0]
        needed |= {(group, kind.resource, verb) for verb in ("get", "list", "patch")}
        if kind.suspend is None:
            needed.add((group, f"{kind.resource}/scale", "patch"))
    assert granted == needed


def test_the_kueue_admission_check_is_the_controllers_and_its_role_lets_it_answer() -> None:
    documents = _documents(ROOT / "deploy/kubernetes/kueue-admission-check.yaml")
    (check,) = [d for d in documents if d["kind"] == "AdmissionCheck"]
    assert check["spec"]["controllerName"] == load_settings().kueue_controller_name
    (role,) = [d for d in documents if d["kind"] == "ClusterRole"]
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    kueue = "kueue.x-k8s.io"
    needed = {
        (kueue, "workloads", "list"),
        (kueue, "admissionchecks", "list"),
        (kueue, "resourceflavors", "list"),
        (kueue, "clusterqueues", "list"),
        (kueue, "workloads/status", "patch"),
        (kueue, "admissionchecks/status", "patch"),
        (kueue, "workloads", "patch"),
        ("jobset.x-k8s.io", "jobsets", "get"),
        ("ray.io", "rayjobs", "get"),
        ("kubeflow.org", "pytorchjobs", "get"),
    }
    assert needed <= granted
    assert not {verb for _, _, verb in granted} & {"create", "update", "delete", "deletecollection"}
    (binding,) = [d for d in documents if d["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    (subject,) = binding["subjects"]
    assert subject["name"] == _one("ServiceAccount")["metadata"]["name"]
