"""The Kubernetes adapter and the fake API server held to Kubernetes' own definitions (the
official client's operations, the JSON schemas of Kubernetes' OpenAPI that kubernetes-validate
bundles), not to each other; and real answers of an API server, from Kubernetes' own
documentation, replayed through the adapter.

Every contract test already checks each exchange it makes (harness_kubernetes.py); these
prove that the checks see every call the adapter makes, that they catch a request Kubernetes
does not define and an answer outside its schema, and that the Job conditions Kubernetes
defines are read as it defines them. The custom resources (JobSet, RayJob, PyTorchJob) are
held to their vendored CustomResourceDefinitions: each stopped, resumed, described and
listed through the adapter, its requests and the fake's answers checked against its
definition, and a suspend patched at a field its definition does not have caught (the API
server would prune it, and the workload would run on).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from governor.adapters.providers.kubernetes import (
    API,
    FINISHED,
    BearerToken,
    KubernetesProvider,
)
from governor.domain.model import PodState
from governor.domain.ports import (
    CallOutcome,
    ListsPods,
    PodDescription,
    ProviderError,
    Resumes,
    StopsPreserving,
)
from governor.fakes.kubernetes import FakeKubernetes, merge_patch
from tests.contract import conformance_kubernetes
from tests.contract.conformance import SPECS, Exchange
from tests.contract.conftest import govern
from tests.contract.harness_kubernetes import HARNESS as KUBERNETES

CORPUS = json.loads((SPECS / "kubernetes" / "answers.json").read_text())["answers"]
JOB = "/apis/batch/v1/namespaces/ml/jobs/pod-1"
# A workload of each custom resource the adapter suspends, and the path of its object
CUSTOM = {
    "ml/jobset/sweep": "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml/jobsets/sweep",
    "ml/rayjob/tune": "/apis/ray.io/v1/namespaces/ml/rayjobs/tune",
    "ml/pytorchjob/ddp": "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/ddp",
}
PYTORCHJOB = CUSTOM["ml/pytorchjob/ddp"]
SCALE = "/apis/apps/v1/namespaces/ml/deployments/web/scale"
MERGE = "application/merge-patch+json"
CONDITION = json.loads(conformance_kubernetes.schema_file("V1JobCondition").read_text())


def test_every_call_is_an_operation_of_the_official_client(tmp_path: Path) -> None:
    with govern(KUBERNETES, tmp_path) as governed:
        for ref in ("ml/deployment/web", "ml/statefulset/db", *CUSTOM):
            governed.fake.add_pod(ref, "1.00")
        adapter = governed.adapter
        assert isinstance(adapter, StopsPreserving) and isinstance(adapter, Resumes)
        assert len(adapter.pods()) == 6
        for ref in ("ml/job/pod-1", "ml/deployment/web", "ml/statefulset/db", *CUSTOM):
            assert adapter.stop(ref).outcome is CallOutcome.PENDING
            assert adapter.resume(ref).outcome is CallOutcome.DONE
        assert adapter.stop(KUBERNETES.missing).outcome is CallOutcome.DONE
        exchanges = governed.exchanges
    called = [conformance_kubernetes.operation_of(e.method, e.path) for e in exchanges]
    assert None not in called
    assert {o.name for o in called if o} == {
        "list_job_for_all_namespaces",
        "list_deployment_for_all_namespaces",
        "list_stateful_set_for_all_namespaces",
        "read_namespaced_job",
        "patch_namespaced_job",
        "read_namespaced_deployment",
        "patch_namespaced_deployment",
        "patch_namespaced_deployment_scale",
        "read_namespaced_stateful_set",
        "patch_namespaced_stateful_set",
        "patch_namespaced_stateful_set_scale",
        *(
            f"{operation}:{plural}"
            for plural in ("jobsets", "rayjobs", "pytorchjobs")
            for operation in (
                "list_custom_object_for_all_namespaces",
                "get_namespaced_custom_object",
                "patch_namespaced_custom_object",
            )
        ),
    }
    assert {e.content_type for e in exchanges if e.method == "PATCH"} == {MERGE}
    assert {e.status for e in exchanges} == {200, 404}
    assert conformance_kubernetes.off_spec(exchanges) == []


@pytest.mark.parametrize(
    ("exchange", "says"),
    [
        (Exchange("PATCH", f"{JOB}/scale", {}, {"spec": {"replicas": 0}}, 200, None, MERGE), ""),
        (Exchange("POST", JOB, {}, {"spec": {"suspend": True}}, 200, None, MERGE), ""),
        (
            Exchange("PATCH", JOB, {}, {"spec": {"suspend": True}}, 200, None, "application/json"),
            "takes no 'application/json' body",
        ),
        (
            Exchange("PATCH", JOB, {}, {"spec": {"suspended": True}}, 200, None, MERGE),
            "'suspended' was unexpected",
        ),
        (
            Exchange("PATCH", JOB, {}, {"spec": {"suspend": "true"}}, 200, None, MERGE),
            "'true' is not of type 'boolean', 'null'",
        ),
        (
            Exchange("PATCH", SCALE, {}, {"spec": {"replicas": "0"}}, 200, None, MERGE),
            "'0' is not of type 'integer', 'null'",
        ),
        (
            Exchange("PATCH", SCALE, {"force": ["true"], "grace": ["0"]}, None, 200, None, MERGE),
            "takes no 'grace'",
        ),
        (Exchange("GET", JOB, {}, {"spec": {}}, 200, None, MERGE), "takes no body"),
        (
            Exchange("PATCH", PYTORCHJOB, {}, {"spec": {"suspend": True}}, 200, None, MERGE),
            "'suspend' was unexpected",
        ),
        (
            Exchange(
                "PATCH",
                CUSTOM["ml/jobset/sweep"],
                {},
                {"spec": {"runPolicy": {"suspend": True}}},
                200,
                None,
                MERGE,
            ),
            "'runPolicy' was unexpected",
        ),
        (
            Exchange(
                "PATCH",
                CUSTOM["ml/rayjob/tune"],
                {},
                {"spec": {"suspend": "true"}},
                200,
                None,
                MERGE,
            ),
            "'true' is not of type 'boolean'",
        ),
        (
            Exchange("PATCH", f"{CUSTOM['ml/rayjob/tune']}/scale", {}, {}, 200, None, MERGE),
            "",  # RayJob's definition declares no scale subresource
        ),
        (
            Exchange("DELETE", PYTORCHJOB, {}, None, 200, None, MERGE),
            "",  # the adapter is allowed no delete
        ),
    ],
)
def test_a_request_kubernetes_does_not_define_is_caught(exchange: Exchange, says: str) -> None:
    errors = conformance_kubernetes.off_spec([exchange])
    assert errors, exchange
    assert says in errors[0] if says else "no operation" in errors[0], errors


def test_an_answer_of_the_fake_outside_the_schema_is_caught(tmp_path: Path) -> None:
    with govern(KUBERNETES, tmp_path) as governed:
        governed.fake.add_pod("ml/deployment/web", "1.00")
        adapter = governed.adapter
        assert isinstance(adapter, StopsPreserving)
        adapter.pods()
        adapter.describe("ml/job/pod-1")
        adapter.stop("ml/deployment/web")
        with pytest.raises(ProviderError):
            adapter.describe(KUBERNETES.missing)
        exchanges = governed.exchanges
    job = next(e for e in exchanges if e.path == JOB)
    listed = next(e for e in exchanges if e.path == "/apis/batch/v1/jobs")
    scaled = next(e for e in exchanges if e.path == SCALE)
    missing = next(e for e in exchanges if e.status == 404)
    assert conformance_kubernetes.off_spec([job, listed, scaled, missing]) == []
    off = [
        (_changed(job, status={"active": "1"}), "'1' is not of type 'integer', 'null'"),
        (_changed(job, status={"phase": "Running"}), "'phase' was unexpected"),
        (_changed(job, kind="Deployment"), "'Deployment' is not one of ['Job']"),
        (_changed(listed, items=[{"state": "running"}]), "'state' was unexpected"),
        (_changed(scaled, spec={"replicas": 0.5}), "0.5 is not of type 'integer', 'null'"),
        (_changed(missing, code="404"), "'404' is not of type 'integer', 'null'"),
        (replace(missing, answer={"error": "not found"}), "'error' was unexpected"),
        (replace(job, status=201), "answered 201, which read_namespaced_job does not"),
    ]
    for exchange, says in off:
        errors = conformance_kubernetes.off_spec([exchange])
        assert any(says in error for error in errors), (says, errors)


# Each reason Kubernetes' API conventions define for a failed call (with its HTTP code), as a
# stop of a running Job comes to when the API server answers its suspend so: a request that
# "can never succeed", a refused credential, a refusal of the data, permanent; a conflict
# read again (still running: retryable); the rate limit, a server timeout, an internal error,
# an unavailable server, retryable.
REASONS = {
    "BadRequest": (400, CallOutcome.PERMANENT),
    "Unauthorized": (401, CallOutcome.PERMANENT),
    "Forbidden": (403, CallOutcome.PERMANENT),
    "NotFound": (404, CallOutcome.PERMANENT),  # naming no object: a wrong path, not "gone"
    "MethodNotAllowed": (405, CallOutcome.PERMANENT),
    "Conflict": (409, CallOutcome.RETRYABLE),
    "UnsupportedMediaType": (415, CallOutcome.PERMANENT),
    "Invalid": (422, CallOutcome.PERMANENT),
    "TooManyRequests": (429, CallOutcome.RETRYABLE),
    "InternalError": (500, CallOutcome.RETRYABLE),
    "ServiceUnavailable": (503, CallOutcome.RETRYABLE),
}


@pytest.mark.parametrize(("reason", "code", "outcome"), [(r, *v) for r, v in REASONS.items()])
def test_each_status_reason_is_classified_as_the_api_conventions_define_it(
    tmp_path: Path, reason: str, code: int, outcome: CallOutcome
) -> None:
    with govern(KUBERNETES, tmp_path) as governed:
        adapter = governed.adapter
        assert isinstance(adapter, StopsPreserving)
        governed.answer_next("", f"status:{code}")  # the read, then the suspend
        result = adapter.stop(KUBERNETES.running)
        assert result.outcome is outcome, result
        refused = next(e for e in governed.exchanges if e.status == code)
    assert refused.method == "PATCH" and refused.answer["reason"] == reason
    assert conformance_kubernetes.off_spec([refused]) == []


def _changed(exchange: Exchange, **fields: Any) -> Exchange:
    return replace(exchange, answer={**exchange.answer, **fields})


def _words(field: str, pattern: str) -> list[str]:
    """The values the JobCondition schema's description of `field` names."""
    described = CONDITION["properties"][field]["description"]
    found = re.search(pattern, described)
    assert found is not None, described
    return re.findall(r"[A-Z][a-z]+", found.group(1))


TYPES = _words("type", r"Type of job condition, (.+)\.")
STATUSES = _words("status", r"one of (.+)\.")


def test_the_adapter_names_every_finishing_condition_kubernetes_defines() -> None:
    """A condition type Kubernetes adds to its definition fails here until it is read."""
    assert set(TYPES) == set(FINISHED)
    assert set(STATUSES) == {"True", "False", "Unknown"}


def _read(job: dict[str, Any]) -> PodState:
    transport = httpx.MockTransport(lambda _: httpx.Response(200, json=job))
    credentials = BearerToken(httpx.Client(transport=transport), "token", "https://k8s")
    return KubernetesProvider(credentials).describe("default/job/pi").state


@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("kind", [*TYPES, "Suspended", "Hibernated"])
def test_each_job_condition_is_read_as_kubernetes_defines_it(kind: str, status: str) -> None:
    """A Job with no active pod, its condition `kind` at `status`: finished (stopped) only
    for a finishing condition that is "True"; any other, even one no definition names,
    leaves it running: metering on is the safe mistake."""
    job = copy.deepcopy(CORPUS[0]["body"])
    job["spec"].pop("completions")  # only the condition can say it finished
    job["status"] = {"conditions": [{"type": kind, "status": status}]}
    assert conformance_kubernetes.schema_errors(job, "V1Job") == []
    finished = kind in TYPES and status == "True"
    assert _read(job) is (PodState.STOPPED if finished else PodState.RUNNING)


def replayed(entry: dict[str, Any]) -> tuple[KubernetesProvider, list[str]]:
    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(f"{request.method} {request.url.path}")
        return httpx.Response(entry["status"], json=entry["body"])

    client = httpx.Client(transport=httpx.MockTransport(answer))
    return KubernetesProvider(BearerToken(client, "token", "https://k8s")), asked


@pytest.mark.parametrize("entry", CORPUS, ids=[e["ref"] for e in CORPUS])
def test_real_answers_replayed_through_the_adapter(entry: dict[str, Any]) -> None:
    adapter, asked = replayed(entry)
    if entry["call"] == "describe":
        assert adapter.describe(entry["ref"]).state is PodState(entry["expect"]["state"])
    else:
        result = adapter.stop(entry["ref"])
        assert result.outcome is CallOutcome(entry["expect"]["outcome"]), result
    assert asked[0] == f"GET {entry['path']}"


@pytest.mark.parametrize("entry", CORPUS, ids=[e["ref"] for e in CORPUS])
def test_each_real_answer_is_one_kubernetes_defines(entry: dict[str, Any]) -> None:
    errors = conformance_kubernetes.answer_errors(
        "GET", entry["path"], entry["status"], entry["body"]
    )
    assert errors == []


def test_the_corpus_cites_each_answer() -> None:
    assert CORPUS and all(entry["source"].startswith("https://") for entry in CORPUS)


@pytest.mark.parametrize("ref", list(CUSTOM))
def test_a_custom_workload_is_stopped_described_listed_and_resumed_as_its_definition_says(
    tmp_path: Path, ref: str
) -> None:
    with govern(KUBERNETES, tmp_path) as governed:
        fake = governed.fake
        assert isinstance(fake, FakeKubernetes)
        fake.add_pod(ref, "4.00")
        adapter = governed.adapter
        assert isinstance(adapter, StopsPreserving) and isinstance(adapter, Resumes)
        assert adapter.describe(ref).state is PodState.RUNNING
        before = copy.deepcopy(fake.workloads[ref].spec)
        listed = {pod.ref: pod for pod in adapter.pods()}
        assert listed[ref].description.state is PodState.RUNNING
        assert listed[ref].gpu_count == 1 and listed[ref].billing
        stopped = adapter.stop(ref)
        assert stopped.outcome is CallOutcome.PENDING, stopped
        assert KUBERNETES.stopped(fake, ref) and not KUBERNETES.billing(fake, ref)
        assert adapter.describe(ref).state is PodState.STOPPED
        assert adapter.stop(ref).outcome is CallOutcome.DONE
        suspend = API[ref.split("/")[1]].suspend
        assert suspend is not None
        suspended = _at(suspend, True)["spec"]
        assert fake.workloads[ref].spec == merge_patch(before, suspended)  # its claims kept
        assert adapter.resume(ref).outcome is CallOutcome.DONE
        assert KUBERNETES.billing(fake, ref)
        assert adapter.describe(ref).state is PodState.RUNNING
        exchanges = governed.exchanges
    patches = [e for e in exchanges if e.method == "PATCH"]
    assert [e.path for e in patches] == [CUSTOM[ref]] * 2
    assert [e.body for e in patches] == [_at(suspend, True), _at(suspend, False)]
    assert conformance_kubernetes.off_spec(exchanges) == []
    assert fake.calls("DELETE") == []


def _at(path: tuple[str, ...], value: bool) -> dict[str, Any]:
    body: Any = value
    for key in reversed(path):
        body = {key: body}
    return dict(body)


def test_a_pytorchjob_suspended_at_spec_suspend_is_caught_and_runs_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An adapter that patched a PyTorchJob's suspend where a Job has it: the conformance
    check names the field, and the fake, pruning it as the API server would, keeps the
    pods running, so the stop is never confirmed."""
    ref = "ml/pytorchjob/ddp"
    wrong = replace(API["pytorchjob"], suspend=("spec", "suspend"))
    monkeypatch.setitem(API, "pytorchjob", wrong)
    with govern(KUBERNETES, tmp_path) as governed:
        fake = governed.fake
        assert isinstance(fake, FakeKubernetes)
        fake.add_pod(ref, "4.00")
        adapter = governed.adapter
        assert isinstance(adapter, StopsPreserving)
        assert adapter.stop(ref).outcome is CallOutcome.PENDING  # it believes it suspended
        assert KUBERNETES.billing(fake, ref)
        assert adapter.describe(ref).state is PodState.RUNNING
        exchanges = list(governed.exchanges)
        governed.exchanges.clear()  # judged here: govern's own check would fail the test
    errors = conformance_kubernetes.off_spec(exchanges)
    assert errors and all("'suspend' was unexpected" in error for error in errors), errors


@pytest.mark.parametrize("ref", list(CUSTOM))
def test_an_answer_of_the_fake_outside_a_custom_definition_is_caught(
    tmp_path: Path, ref: str
) -> None:
    with govern(KUBERNETES, tmp_path) as governed:
        governed.fake.add_pod(ref, "4.00")
        adapter = governed.adapter
        assert isinstance(adapter, StopsPreserving) and isinstance(adapter, ListsPods)
        adapter.describe(ref)
        adapter.pods()
        exchanges = governed.exchanges
    read = next(e for e in exchanges if e.path == CUSTOM[ref])
    listed = next(e for e in exchanges if e.path.endswith(CUSTOM[ref].split("/")[-2]))
    assert conformance_kubernetes.off_spec([read, listed]) == []
    off = [
        (_changed(read, status={"phase": "Running"}), "'phase' was unexpected"),
        (_changed(read, kind="Job"), "'Job' is not one of"),
        (_changed(read, spec={**read.answer["spec"], "suspended": True}), "'suspended' was"),
        (_changed(listed, items=[{"state": "running"}]), "'state' was unexpected"),
        (replace(read, status=201), "which get_namespaced_custom_object"),
    ]
    for exchange, says in off:
        errors = conformance_kubernetes.off_spec([exchange])
        assert any(says in error for error in errors), (says, errors)


def _described(obj: dict[str, Any], ref: str) -> PodDescription:
    transport = httpx.MockTransport(lambda _: httpx.Response(200, json=obj))
    credentials = BearerToken(httpx.Client(transport=transport), "token", "https://k8s")
    return KubernetesProvider(credentials).describe(ref)


def _custom(
    tmp_path: Path, ref: str, spec: dict[str, Any], status: dict[str, Any]
) -> dict[str, Any]:
    """A workload of the fake's, its spec changed and its status `status`, checked against
    its definition first."""
    fake = FakeKubernetes(tmp_path / "kubernetes.json", "token")
    fake.add_pod(ref, "1")
    obj = fake.workloads[ref].obj(fake.clock())
    obj["spec"] = merge_patch(obj["spec"], spec)
    obj["status"] = status
    plural = CUSTOM[ref].split("/")[-2]
    assert conformance_kubernetes.schema_errors(obj, f"crd:{plural}") == []
    return obj


# KubeRay's JobDeploymentStatus (rayjob_types.go), with spec.suspend and
# spec.shutdownAfterJobFinishes, and the state each amounts to (rayjob_controller.go: only
# Initializing and Running go on to Suspending, New and Retrying through Initializing; a
# finished RayJob's cluster is deleted only with shutdownAfterJobFinishes).
RAY = [
    ("", False, True, PodState.RUNNING),
    ("", True, True, PodState.STOPPING),
    ("Initializing", True, True, PodState.STOPPING),
    ("Running", False, True, PodState.RUNNING),
    ("Running", True, True, PodState.STOPPING),
    ("Retrying", True, True, PodState.STOPPING),
    ("Suspending", False, True, PodState.STOPPING),
    ("Suspended", True, True, PodState.STOPPED),
    ("Complete", False, True, PodState.STOPPED),
    ("Failed", False, True, PodState.STOPPED),
    ("Complete", False, False, PodState.RUNNING),
    ("Waiting", True, True, PodState.RUNNING),
    ("ValidationFailed", True, False, PodState.RUNNING),
]


@pytest.mark.parametrize(("deployment", "suspend", "shutdown", "state"), RAY)
def test_each_rayjob_deployment_status_is_read_as_kuberay_defines_it(
    tmp_path: Path, deployment: str, suspend: bool, shutdown: bool, state: PodState
) -> None:
    spec = {"suspend": suspend, "shutdownAfterJobFinishes": shutdown}
    status = {"jobDeploymentStatus": deployment} if deployment else {}
    described = _described(_custom(tmp_path, "ml/rayjob/tune", spec, status), "ml/rayjob/tune")
    assert described.state is state
    assert described.provider_state == (deployment or None) and described.state_known


def test_a_rayjob_status_kuberay_does_not_define_runs_and_is_unknown(tmp_path: Path) -> None:
    obj = _custom(tmp_path, "ml/rayjob/tune", {}, {"jobDeploymentStatus": "Hibernating"})
    described = _described(obj, "ml/rayjob/tune")
    assert described.state is PodState.RUNNING and not described.state_known
    assert described.provider_state == "Hibernating"


# The condition types each controller writes (JobSetConditionType; the training operator's
# JobConditionType), one not defined, and what each at "True" means with no active pod.
CONDITIONS = {
    "ml/jobset/sweep": (("Completed", "Failed"), ("Suspended", "StartupPolicyCompleted")),
    "ml/pytorchjob/ddp": (("Succeeded", "Failed"), ("Created", "Running", "Restarting")),
}


@pytest.mark.parametrize("ref", list(CONDITIONS))
@pytest.mark.parametrize("status", ["True", "False", "Unknown"])
def test_each_condition_of_a_jobset_or_pytorchjob_is_read_as_its_controller_writes_it(
    tmp_path: Path, ref: str, status: str
) -> None:
    finishing, others = CONDITIONS[ref]
    for kind in (*finishing, *others, "Hibernated"):
        condition = {
            "type": kind,
            "status": status,
            "reason": "Reason",
            "message": "said",
            "lastTransitionTime": "2026-12-05T00:00:00Z",
        }
        obj = _custom(tmp_path, ref, {}, {"conditions": [condition]})
        finished = kind in finishing and status == "True"
        assert _described(obj, ref).state is (PodState.STOPPED if finished else PodState.RUNNING), (
            kind,
            status,
        )
