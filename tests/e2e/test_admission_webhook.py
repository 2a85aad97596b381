"""The Kubernetes validating admission webhook over real HTTPS, served by `governor serve` on
its own port with a test CA's certificate: AdmissionReview v1 requests whose objects the
official client's models built (validated against Kubernetes' OpenAPI schemas; the CRD kinds
plain objects of their published shape), their envelope and the answers validated against
the schema transcribed from Kubernetes' documentation (tests/specs/kubernetes/).

An affordable GPU workload is allowed with a warning naming its budget; an unaffordable one is
denied with the arithmetic and what to change; a workload without GPUs is always allowed; the
webhook reserves and records nothing, and the API's port does not serve it. With a client CA
set, a caller without a client certificate is refused at TLS.
"""

from __future__ import annotations

import json
import ssl
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import kubernetes_validate
import pytest
import trustme
from jsonschema import Draft202012Validator

from tests import kube_objects as k
from tests.e2e.conftest import (
    HTTP_TIMEOUT_S,
    GovernorServer,
    ServerFactory,
    declare_budget,
    free_port,
    ok,
)

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ENVELOPE = Draft202012Validator(
    json.loads((ROOT / "tests/specs/kubernetes/admission-review-v1.json").read_text())
)
KUBERNETES = "1.37.0"
H100 = "NVIDIA-H100-80GB-HBM3"
RATE_CARD = {f"kubernetes:{H100}": "4.00"}
CORE = {"": "v1", "batch": "batch/v1", "apps": "apps/v1"}
PLURAL = {"Pod": "pods", "Job": "jobs", "Deployment": "deployments", "RayJob": "rayjobs"}


class Certs:
    def __init__(self, folder: Path) -> None:
        self.ca = trustme.CA()
        server = self.ca.issue_cert("127.0.0.1", "localhost")
        self.cert, self.key = folder / "webhook.crt", folder / "webhook.key"
        server.private_key_pem.write_to_path(str(self.key))
        server.cert_chain_pems[0].write_to_path(str(self.cert))
        for pem in server.cert_chain_pems[1:]:
            pem.write_to_path(str(self.cert), append=True)
        self.client_ca = trustme.CA()  # the API server's client certificates' CA
        self.client_ca_file = folder / "clients-ca.crt"
        self.client_ca.cert_pem.write_to_path(str(self.client_ca_file))

    def verifying(self, *, client_cert: bool = False) -> ssl.SSLContext:
        """A client context that trusts the webhook's CA, with a client certificate signed by
        the clients' CA where asked."""
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        if client_cert:
            self.client_ca.issue_cert("kube-apiserver").configure_cert(context)
        return context


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return Certs(tmp_path)


def _start(start_server: ServerFactory, certs: Certs, **env: str) -> tuple[GovernorServer, str]:
    port = free_port()
    server = start_server(
        PYTHONPATH=str(ROOT),  # this tree's governor, whatever the environment installed
        GOVERNOR_RATE_CARD=json.dumps(RATE_CARD),
        GOVERNOR_WEBHOOK_PORT=str(port),
        GOVERNOR_WEBHOOK_CERT_FILE=str(certs.cert),
        GOVERNOR_WEBHOOK_KEY_FILE=str(certs.key),
        **env,
    )
    return server, f"https://127.0.0.1:{port}"


@pytest.fixture
def webhook(start_server: ServerFactory, certs: Certs) -> Iterator[tuple[GovernorServer, str]]:
    yield _start(start_server, certs)


def review(
    obj: dict[str, Any], *, operation: str = "CREATE", dry_run: bool = False
) -> dict[str, Any]:
    """The AdmissionReview the API server sends for `obj`, its object checked first against
    Kubernetes' schema where Kubernetes defines the kind."""
    group, _, version = obj["apiVersion"].rpartition("/")
    if group in CORE:
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)
    kind = {"group": group, "version": version, "kind": obj["kind"]}
    resource = {"group": group, "version": version, "resource": PLURAL[obj["kind"]]}
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "name": obj["metadata"]["name"],
            "namespace": obj["metadata"].get("namespace", "ml"),
            "operation": operation,
            "userInfo": {"username": "alice", "uid": "u-1", "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": None,
            "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }
    ENVELOPE.validate(body)
    return body


def answer(client: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """The webhook's answer: the envelope's schema, the request's uid."""
    found = ok(client.post(f"{url}/validate", json=body))
    ENVELOPE.validate(found)
    assert set(found) == {"apiVersion", "kind", "response"}
    assert found["response"]["uid"] == body["request"]["uid"]
    response: dict[str, Any] = found["response"]
    return response


def labelled(budget: dict[str, Any], hours: str) -> dict[str, Any]:
    return {
        "labels": {"governor-budget": budget["name"]},
        "annotations": {"governor-max-hours": hours},
    }


def test_gpu_workloads_are_allowed_or_denied_and_others_always_allowed(
    webhook: tuple[GovernorServer, str], certs: Certs
) -> None:
    server, url = webhook
    with server.client() as operator:
        budget = declare_budget(operator, "500")
        events_before = len(ok(operator.get(f"/v1/events?budget_id={budget['id']}"))["items"])
    with httpx.Client(verify=certs.verifying(), timeout=HTTP_TIMEOUT_S) as client:
        # 8 x H100 at $4.00 x 1 pod x 10 h = $320 of $500: allowed, the budget named
        fits = answer(client, url, review(k.job("fits", 8, model=H100, **labelled(budget, "10"))))
        assert fits["allowed"] is True, fits
        said = " ".join(fits["warnings"])
        assert f"budget {budget['name']}" in said and "= $320.00" in said, said
        assert "the request's maximum duration" in said

        # 2 pods of it: $640, more than the $500 available: denied, with the arithmetic
        big = k.job("big", 8, parallelism=2, model=H100, **labelled(budget, "10"))
        denied = answer(client, url, review(big))
        assert denied["allowed"] is False
        assert denied["status"]["code"] == 403
        message = denied["status"]["message"]
        assert "Job ml/big denied" in message, message
        assert "x 2 nodes x 10 h = $640.00" in message and "$500.00 available" not in message
        assert "$500.00 remaining" in message and "= $500.00." in message, message
        assert "governor-max-hours" in message and "governor ext request" in message

        # the same asked as a dry run: the same answer, and nothing changes either way
        again = answer(client, url, review(big, dry_run=True))
        assert again["allowed"] is False and again["status"]["message"] == message

        # no budget named: denied, saying how to name one
        unnamed = answer(client, url, review(k.pod("nb", 1, model=H100)))
        assert unnamed["allowed"] is False
        assert "governor-budget=<budget name>" in unnamed["status"]["message"]

        # a bad annotation: denied, saying what to write
        bad = k.job("bad", 1, model=H100, **labelled(budget, "forever"))
        refused = answer(client, url, review(bad))
        assert refused["allowed"] is False and refused["status"]["code"] == 400
        assert "governor-max-hours" in refused["status"]["message"]

        # no GPU: allowed, whatever its budget says (none here), however many replicas
        for plain in (k.deployment("web", 0, replicas=50), k.pod("tiny", 0)):
            allowed = answer(client, url, review(plain))
            assert allowed["allowed"] is True and "warnings" not in allowed, allowed
        # a CRD kind read as its published shape: a RayJob of 2 x 8 H100 workers for 1 h
        ray = k.rayjob(
            "ray", 0, [{"groupName": "w", "replicas": 2, "gpus": 8}], model=H100,
            **labelled(budget, "1"),
        )  # fmt: skip
        assert answer(client, url, review(ray))["allowed"] is True

        # a review it cannot read: 400, never a 500
        malformed = client.post(f"{url}/validate", json={"kind": "AdmissionReview"})
        assert malformed.status_code == 400 and "admission.k8s.io/v1" in malformed.text
        assert client.post(f"{url}/validate", content=b"{").status_code == 400
        # the webhook's port serves nothing else
        assert client.get(f"{url}/v1/budgets").status_code == 404
        assert client.get(f"{url}/docs").status_code == 404

    with server.client() as operator:
        figures = ok(operator.get(f"/v1/budgets/{budget['id']}"))
        assert Decimal(figures["reserved_for_launches_usd"]) == 0  # judged, never reserved
        events = ok(operator.get(f"/v1/events?budget_id={budget['id']}"))["items"]
        assert len(events) == events_before  # and nothing recorded
        # the API's port does not serve the admission route
        assert operator.post("/validate", json=review(big)).status_code in (404, 405)


def test_with_a_client_ca_a_caller_without_a_client_certificate_is_refused_at_tls(
    start_server: ServerFactory, certs: Certs
) -> None:
    server, url = _start(
        start_server,
        certs,
        GOVERNOR_WEBHOOK_CLIENT_CA_FILE=str(certs.client_ca_file),
        # no decision in time (a microsecond): answered per the setting, here allow
        GOVERNOR_WEBHOOK_DECIDE_S="0.000001",
        GOVERNOR_WEBHOOK_ON_ERROR="allow",
    )
    with server.client() as operator:
        budget = declare_budget(operator, "500")
    job = review(k.job("train", 8, model=H100, **labelled(budget, "1")))
    refused_at_tls = (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)
    stranger = httpx.Client(verify=certs.verifying(), timeout=HTTP_TIMEOUT_S)
    with stranger, pytest.raises(refused_at_tls):
        stranger.post(f"{url}/validate", json=job)
    with httpx.Client(verify=certs.verifying(client_cert=True), timeout=HTTP_TIMEOUT_S) as api:
        undecided = answer(api, url, job)
        assert undecided["allowed"] is True
        message = undecided["status"]["message"]
        assert "could not decide" in message and "GOVERNOR_WEBHOOK_ON_ERROR=allow" in message
        assert undecided["warnings"] == [message]
        assert answer(api, url, review(k.pod("cpu", 0)))["allowed"] is True
