"""Answers the real Compute Engine and Vast.ai APIs give, as their own documentation and SDK
show them, replayed through the adapters: our fakes are written from the same reading as the
adapters, so these keep both honest. Each answer names where it comes from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import httpx
import pytest

from governor.adapters.providers.gcp import GcpProvider, InstanceNotFound, StaticToken
from governor.adapters.providers.vast import VastProvider
from governor.domain.model import PodState
from governor.domain.ports import CallOutcome, CallResult

ZONE_URL = "https://www.googleapis.com/compute/v1/projects/my-project/zones/us-central1-a"
RUNNING_VM = {
    "kind": "compute#instance",
    "name": "train-1",
    "status": "RUNNING",
    "machineType": f"{ZONE_URL}/machineTypes/a2-highgpu-1g",
    "zone": ZONE_URL,
}


@dataclass(frozen=True)
class Replayed:
    source: str  # where the answer is published
    status: int
    body: Any = None
    text: str | None = None  # a body that is not JSON
    headers: dict[str, str] = field(default_factory=dict)

    def response(self) -> httpx.Response:
        if self.text is not None:
            return httpx.Response(self.status, text=self.text, headers=self.headers)
        return httpx.Response(self.status, json=self.body, headers=self.headers)


def _operation_failed(code: str, message: str) -> dict[str, Any]:
    return {
        "kind": "compute#operation",
        "name": "operation-1700000000000-5f0e1c2d3b4a5-6c7d8e9f-0a1b2c3d",
        "zone": ZONE_URL,
        "operationType": "start",
        "targetLink": f"{ZONE_URL}/instances/train-1",
        "status": "DONE",
        "progress": 100,
        "error": {"errors": [{"code": code, "message": message}]},
        "httpErrorStatusCode": 400,
        "selfLink": f"{ZONE_URL}/operations/operation-1700000000000-5f0e1c2d3b4a5",
    }


NOT_FOUND = Replayed(
    "Compute Engine's error body for a missing instance, as quoted in the provider reference "
    "(4.6 Rate limits and errors)",
    404,
    {
        "error": {
            "code": 404,
            "message": "The resource 'projects/my-project/zones/us-central1-a/instances/"
            "train-1' was not found",
            "errors": [
                {
                    "domain": "global",
                    "reason": "notFound",
                    "message": "The resource 'projects/my-project/zones/us-central1-a/"
                    "instances/train-1' was not found",
                }
            ],
        }
    },
)
RATE_LIMITED = Replayed(
    "Google APIs' standard error for a rate limit (403, domain usageLimits, reason "
    "rateLimitExceeded), as Compute Engine throttles (provider reference 4.6)",
    403,
    {
        "error": {
            "code": 403,
            "message": "Rate Limit Exceeded",
            "errors": [
                {
                    "domain": "usageLimits",
                    "reason": "rateLimitExceeded",
                    "message": "Rate Limit Exceeded",
                }
            ],
        }
    },
)
NO_CAPACITY = Replayed(
    "Compute Engine's Operation for a start without capacity in the zone: the error code and "
    "message of cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-"
    "availability, in the Operation fields of the zoneOperations.get reference",
    200,
    _operation_failed(
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        "The zone 'projects/my-project/zones/us-central1-a' does not have enough resources "
        "available to fulfill the request.  Try a different zone, or try again later.",
    ),
)
QUOTA = Replayed(
    "Compute Engine's Operation for a start over quota: QUOTA_EXCEEDED, the code the "
    "discovery document's Operation.error.errors[].errorDetails names for quotaInfo",
    200,
    _operation_failed(
        "QUOTA_EXCEEDED", "Quota 'NVIDIA_A100_GPUS' exceeded.  Limit: 0.0 in region us-central1."
    ),
)


def _gcp(answers: dict[tuple[str, str], Replayed]) -> Callable[[], GcpProvider]:
    """An adapter whose requests ("GET", "" for the VM; "POST", "/start") get `answers`."""

    def google(request: httpx.Request) -> httpx.Response:
        verb = request.url.path.rsplit("/", 1)[-1]
        suffix = f"/{verb}" if verb in ("stop", "start") else ""
        return answers[(request.method, suffix)].response()

    def adapter() -> GcpProvider:
        client = httpx.Client(transport=httpx.MockTransport(google))
        return GcpProvider(client, StaticToken("ya29.token"), "my-project")

    return adapter


def test_gcp_a_missing_instance() -> None:
    gcp = _gcp({("GET", ""): NOT_FOUND})()
    with pytest.raises(InstanceNotFound):
        gcp.describe("us-central1-a/train-1")
    assert gcp.stop("us-central1-a/train-1").outcome is CallOutcome.DONE


def test_gcp_a_rate_limited_stop() -> None:
    gcp = _gcp({("GET", ""): Replayed("", 200, RUNNING_VM), ("POST", "/stop"): RATE_LIMITED})()
    result = gcp.stop("us-central1-a/train-1")
    assert result.outcome is CallOutcome.RETRYABLE and "rateLimitExceeded" in result.detail


@pytest.mark.parametrize(
    ("answer", "outcome", "says"),
    [
        (NO_CAPACITY, CallOutcome.PERMANENT, "has no capacity to start it"),
        (QUOTA, CallOutcome.RETRYABLE, "rate limited or over quota"),
    ],
)
def test_gcp_a_failed_start_operation(answer: Replayed, outcome: CallOutcome, says: str) -> None:
    terminated = {**RUNNING_VM, "status": "TERMINATED"}
    gcp = _gcp({("GET", ""): Replayed("", 200, terminated), ("POST", "/start"): answer})()
    assert gcp.describe("us-central1-a/train-1").state is PodState.STOPPED
    result = gcp.resume("us-central1-a/train-1")
    assert result.outcome is outcome and says in result.detail, result


STOP_ACCEPTED = Replayed(
    'Vast\'s answer to PUT /api/v0/instances/{id}/ {"state": "stopped"} '
    "(stop_instance.yaml; provider reference 3.3)",
    200,
    {"success": True},
)
REFUSED_WITH_CODE = Replayed(
    "Vast's error JSON (api-reference/rate-limits-and-errors; provider reference 3.6)",
    400,
    {"success": False, "error": "invalid_args", "msg": "Invalid state requested."},
)
REFUSED_WITHOUT_CODE = Replayed(
    "Vast's refusal without an error code, as its SDK reads a stop's answer (vastai 1.9.1, "
    "vastai/cli/commands/instances.py stop_instance_impl: success, else msg)",
    200,
    {"success": False, "msg": "Instance is not in a state that can be stopped."},
)
TOO_FREQUENT = Replayed(
    "Vast's 429: plain text, no Retry-After (api-reference/rate-limits-and-errors; provider "
    "reference 3.6)",
    429,
    text="API requests too frequent endpoint threshold=1.0",
)
INSTANCE = Replayed(
    "Vast's instance, with the example values of show_instances.yaml (provider reference 3.2)",
    200,
    {
        "instances": {
            "id": 1001,
            "actual_status": "running",
            "intended_status": "running",
            "cur_state": "running",
            "dph_base": 0.8,
            "dph_total": 0.8021,
            "storage_total_cost": 0.0021,
            "disk_space": 10.0,
        }
    },
)
NO_INSTANCE = Replayed(
    "Vast's answer for an instance id the account does not have: `instances` null (vastai "
    "1.9.1, vastai/api/instances.py show_instance)",
    200,
    {"instances": None},
)


def _vast(read: Replayed, put: Replayed | None = None) -> VastProvider:
    def vast(request: httpx.Request) -> httpx.Response:
        answer = read if request.method == "GET" else put
        assert answer is not None, request
        return answer.response()

    return VastProvider(httpx.Client(transport=httpx.MockTransport(vast)), "key")


def test_vast_an_instance_and_its_rate() -> None:
    described = _vast(INSTANCE).describe("1001")
    assert described.state is PodState.RUNNING
    assert described.hourly_rate_usd == Decimal("0.8")  # dph_total less the disk
    assert described.storage is not None and described.storage.gb == Decimal(10)


@pytest.mark.parametrize(
    ("put", "outcome"),
    [
        (STOP_ACCEPTED, CallOutcome.PENDING),
        (REFUSED_WITH_CODE, CallOutcome.PERMANENT),
        (REFUSED_WITHOUT_CODE, CallOutcome.PERMANENT),
        (TOO_FREQUENT, CallOutcome.RETRYABLE),
    ],
)
def test_vast_a_stop(put: Replayed, outcome: CallOutcome) -> None:
    result: CallResult = _vast(INSTANCE, put).stop("1001")
    assert result.outcome is outcome, result
    assert result.retry_after_s is None


def test_vast_no_such_instance() -> None:
    assert _vast(NO_INSTANCE).stop("1001").outcome is CallOutcome.DONE
