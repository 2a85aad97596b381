"""deploy/kubernetes's admission webhook: the Service, the ValidatingWebhookConfiguration, the
patch that serves it from governor.yaml's Deployment (the patched Deployment validated against
Kubernetes' schemas), cert-manager's certificate, and webhook-certs.sh run with openssl and a
kubectl that records what it is asked."""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from cryptography import x509

from governor.api.admission import PATH
from governor.domain.kube_workloads import KINDS
from governor.settings import Settings
from tests.deploy.test_kubernetes import KUBERNETES_VERSION, _secret_readable
from tests.programs import program

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "deploy" / "kubernetes"
# the resources the webhook's rules name for each kind the governor reads
RESOURCES = {
    "Pod": "pods",
    "Deployment": "deployments",
    "ReplicaSet": "replicasets",
    "StatefulSet": "statefulsets",
    "Job": "jobs",
    "JobSet": "jobsets",
    "RayJob": "rayjobs",
    "RayCluster": "rayclusters",
    "PyTorchJob": "pytorchjobs",
}


def _documents(name: str) -> list[dict[str, Any]]:
    text = (FOLDER / name).read_text(encoding="utf-8")
    return [d for d in yaml.safe_load_all(text) if d is not None]


def _kind(name: str, kind: str) -> dict[str, Any]:
    (found,) = [d for d in _documents(name) if d["kind"] == kind]
    return found


def _merge(base: Any, patch: Any) -> Any:
    """A strategic merge patch as kubectl applies it to these fields: objects merged, lists of
    named items merged by name, other lists replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        return {k: _merge(base.get(k), v) if k in base else v for k, v in patch.items()} | {
            k: v for k, v in base.items() if k not in patch
        }
    if isinstance(base, list) and isinstance(patch, list) and all("name" in i for i in patch):
        named = {i["name"]: i for i in patch}
        merged = [_merge(i, named.pop(i["name"])) if i["name"] in named else i for i in base]
        return merged + list(named.values())
    return patch


def _patched_deployment() -> dict[str, Any]:
    deployment = _kind("governor.yaml", "Deployment")
    (patch,) = _documents("webhook.patch.yaml")
    merged: dict[str, Any] = _merge(copy.deepcopy(deployment), patch)
    return merged


def test_the_patched_deployment_is_valid_and_serves_the_webhook_from_its_secret() -> None:
    deployment = _patched_deployment()
    kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)
    pod = deployment["spec"]["template"]["spec"]
    (governor,) = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in governor["ports"]}
    env = {e["name"]: e.get("value") for e in governor["env"]}
    assert int(env["GOVERNOR_WEBHOOK_PORT"]) == ports["webhook"] and "http" in ports
    assert env["GOVERNOR_REPLICA_ID"] is None  # governor.yaml's own settings kept
    mounts = {m["name"]: m["mountPath"] for m in governor["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "tmp" in mounts and "tmp" in volumes
    (tls,) = [v for v in volumes.values() if "secret" in v]
    for key in ("GOVERNOR_WEBHOOK_CERT_FILE", "GOVERNOR_WEBHOOK_KEY_FILE"):
        assert Path(env[key]).parent == Path(mounts[tls["name"]])
    assert _secret_readable(pod, tls)
    certificate = _kind("webhook-cert-manager.yaml", "Certificate")
    assert tls["secret"]["secretName"] == certificate["spec"]["secretName"]
    settings = Settings(**{k.removeprefix("GOVERNOR_").lower(): v for k, v in env.items() if v})
    assert settings.webhook_port == ports["webhook"]


def test_the_webhook_configuration_is_safe_and_points_at_the_governor() -> None:
    service = _kind("webhook.yaml", "Service")
    config = _kind("webhook.yaml", "ValidatingWebhookConfiguration")
    (hook,) = config["webhooks"]
    assert hook["sideEffects"] == "None" and hook["admissionReviewVersions"] == ["v1"]
    assert hook["failurePolicy"] == "Fail"
    decide_s = Settings.model_fields["webhook_decide_s"].default
    assert decide_s < hook["timeoutSeconds"] <= 30
    target = hook["clientConfig"]["service"]
    assert target["name"] == service["metadata"]["name"]
    assert target["namespace"] == service["metadata"]["namespace"]
    assert target["path"] == PATH
    assert target["port"] == service["spec"]["ports"][0]["port"]
    assert service["spec"]["ports"][0]["targetPort"] == "webhook"
    deployment = _patched_deployment()
    assert service["spec"]["selector"].items() <= (
        deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    # every kind the governor reads is sent, on create and update alone
    sent = {
        (group, resource)
        for rule in hook["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        if rule["operations"] == ["CREATE", "UPDATE"]
    }
    assert sent == {(kind.group, RESOURCES[kind.kind]) for kind in KINDS}
    # never the control plane's namespaces, nor the governor's (it could not restart itself)
    (excluded,) = [
        e
        for e in hook["namespaceSelector"]["matchExpressions"]
        if e["key"] == "kubernetes.io/metadata.name"
    ]
    assert excluded["operator"] == "NotIn"
    assert {"kube-system", target["namespace"]} <= set(excluded["values"])
    assert "objectSelector" not in hook  # a label a user sets could not opt a workload out
    # cert-manager injects the CA of the certificate made for the Service's name
    certificate = _kind("webhook-cert-manager.yaml", "Certificate")
    where = f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}"
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == where
    host = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    assert host in certificate["spec"]["dnsNames"]
    issuer = _kind("webhook-cert-manager.yaml", "Issuer")
    assert certificate["spec"]["issuerRef"]["name"] == issuer["metadata"]["name"]
    assert issuer["metadata"]["namespace"] == certificate["metadata"]["namespace"]


def test_the_certificate_script_makes_a_certificate_for_the_service_and_sets_the_ca(
    tmp_path: Path,
) -> None:
    openssl = Path(program("openssl"))  # the script runs it from PATH
    calls = tmp_path / "calls.jsonl"
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(
        "#!/bin/sh\n"
        f'{sys.executable} -c \'import json, sys; print(json.dumps({{"args": sys.argv[1:], '
        f'"stdin": "" if sys.stdin.isatty() else sys.stdin.read()}}))\' "$@" >>{calls}\n'
        'case "$*" in *--dry-run=client*) echo "kind: Secret";; esac\n'
    )
    kubectl.chmod(0o755)
    out = tmp_path / "out"
    path = f"{openssl.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, "KUBECTL": str(kubectl), "OUT": str(out), "DAYS": "2"}
    result = subprocess.run(
        [program("bash"), str(FOLDER / "webhook-certs.sh")],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    ca = x509.load_pem_x509_certificate((out / "ca.crt").read_bytes())
    cert = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "gpu-governor-webhook.gpu-governor.svc" in names.get_values_for_type(x509.DNSName)
    made = [json.loads(line) for line in calls.read_text().splitlines()]
    create, apply, patch = (m["args"] for m in made)
    assert create[:5] == ["-n", "gpu-governor", "create", "secret", "tls"]
    assert "gpu-governor-webhook-tls" in create and apply == ["apply", "-f", "-"]
    assert made[1]["stdin"].strip() == "kind: Secret"
    assert patch[:3] == ["patch", "validatingwebhookconfiguration", "gpu-governor"]
    (op,) = json.loads(patch[patch.index("-p") + 1])
    assert op["path"] == "/webhooks/0/clientConfig/caBundle"
    assert base64.b64decode(op["value"]) == (out / "ca.crt").read_bytes()
