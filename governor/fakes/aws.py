"""A fake AWS EC2 speaking the Query API subset the EC2 adapter uses, over real HTTP.

POST / with a form body (`Action=DescribeInstances&Version=2016-11-15&InstanceId.1=...`)
signed with AWS Signature Version 4. The signature is checked with botocore's own signer
against this cloud's secret access key, so a wrong secret is refused with AuthFailure, as
EC2 refuses it. It answers DescribeInstances, DescribeVolumes, DescribeSpotInstanceRequests,
DescribeInstanceTypes, StopInstances and StartInstances in EC2's XML (and, once
`explore_costs` is called, Cost Explorer's GetCostAndUsageWithResources in its JSON, failing
in Cost Explorer's own error shapes: see governor.fakes.cost_explorer);
TerminateInstances is honoured (the instance's volumes are deleted with it, but for those
kept on termination) and recorded, as every action is, so a test can prove it never came.
Errors have EC2's `<Response><Errors><Error>` shape; rate limiting is EC2's 503
RequestLimitExceeded, which carries no Retry-After. Besides the canned answers every fake
cloud has, "ec2:<Code>" or "ec2:<Code>:<message>" answers the next call with that EC2
error, "no-capacity" with EC2's InsufficientInstanceCapacity (a 500), and "truncated" with
a 200 whose XML breaks off. A Spot Instance has a Spot request, one-time or persistent:
EC2 refuses to stop a one-time request's instance with UnsupportedOperation.

DescribeInstanceTypes answers from `INSTANCE_TYPES`, a few GPU types with their instance
store as EC2 lists them (EC2 attaches NVMe instance store to every instance of such a type;
it is erased when the instance stops); any other type is InvalidInstanceType. An EBS volume
is deleted with its instance (DeleteOnTermination true) unless it is among the instance's
`kept` volumes, which a TerminateInstances leaves behind, `available`.

DescribeInstances without ids lists every instance, terminated ones too (as EC2 does for a
while), in pages of MaxResults, or of the cloud's `page_size` when none is asked (None: all
at once), each page but the last with a NextToken.

Instances bill their hourly rate for every second they run, by this process's clock; EC2
bills neither `stopping` nor `stopped`. A stopped instance reaches `stopped` after the
cloud's `stop_delay_s` (0: at once); a started one is `pending`, and bills, until the
next request finds it `running`.

    python -m governor.fakes.aws --port 8765 --state cloud.json \\
        --pods 'i-0123456789abcdef0=3.06' [--api-key SECRET_ACCESS_KEY]

It accepts requests signed with the access key id FAKE_ACCESS_KEY_ID and that secret.
"""

from __future__ import annotations

import hmac
import re
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from governor.fakes import http_cloud
from governor.fakes.cost_explorer import CostExplorer
from governor.fakes.http_cloud import ErrorShapes, FakeCloud, FakeRequest, Reply, bill_runs

FAKE_ACCESS_KEY_ID = "AKIAFAKEEC2ACCESSKEY"
DEFAULT_SECRET_ACCESS_KEY = "fake-ec2-secret-access-key"
NAMESPACE = "http://ec2.amazonaws.com/doc/2016-11-15/"
XML = "text/xml;charset=UTF-8"
INSTANCE_ID = re.compile(r"i-(?:[0-9a-f]{8}|[0-9a-f]{17})")
STATE_CODES = {
    "pending": 0,
    "running": 16,
    "shutting-down": 32,
    "terminated": 48,
    "stopping": 64,
    "stopped": 80,
}
# Each type's instance store as DescribeInstanceTypes lists it: (disks, GB each, disk type,
# NVMe support); None: EBS only. From the EC2 instance type pages (GPU accelerated
# instances, storage optimized d2).
INSTANCE_TYPES: dict[str, tuple[int, int, str, str] | None] = {
    "g4dn.xlarge": (1, 125, "ssd", "required"),
    "g5.xlarge": (1, 250, "ssd", "required"),
    "g6.xlarge": (1, 250, "ssd", "required"),
    "p4d.24xlarge": (8, 1000, "ssd", "required"),
    "p5.48xlarge": (8, 3800, "ssd", "required"),
    "p3.2xlarge": None,
    "g3.4xlarge": None,
    "d2.xlarge": (3, 2000, "hdd", "unsupported"),
}
# The HTTP status EC2 answers each error code with; any other code is a 400.
ERROR_STATUS = {
    "AuthFailure": 401,
    "UnauthorizedOperation": 403,
    "InternalError": 500,
    "Unavailable": 503,
    "RequestLimitExceeded": 503,
}
AUTH_FAILURE = "AWS was not able to validate the provided access credentials"
NO_CAPACITY = (
    "We currently do not have sufficient g5.xlarge capacity in the Availability Zone you "
    "requested (us-east-1a). Our system will be working on provisioning additional capacity. "
    "You can currently get g5.xlarge capacity by not specifying an Availability Zone in your "
    "request or choosing us-east-1b, us-east-1c."
)
_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, SignedHeaders=(?P<signed>[^,]+), "
    r"Signature=(?P<signature>[0-9a-f]{64})"
)


@dataclass
class CloudInstance:
    id: str
    instance_type: str
    hourly_rate_usd: str
    started_at: str
    volumes: dict[str, int]  # EBS volume id → GiB; the first is the root volume
    state: str = "running"
    lifecycle: str | None = None  # "spot" for a spot instance
    spot_type: str = "persistent"  # its Spot request's type: "one-time" or "persistent"
    root_device_type: str = "ebs"
    kept: list[str] = field(default_factory=list)  # its volumes not deleted on termination
    stop_requested_at: str | None = None  # billing ends here
    stops_at: str | None = None  # when `stopping` becomes `stopped`
    starts_at: str | None = None  # when `pending` becomes `running`
    earlier_runs: list[list[str]] = field(default_factory=list)  # [from, until] before a start
    tags: dict[str, str] = field(default_factory=dict)

    def bill_usd(self, now: datetime) -> Decimal:
        """The hourly rate for every second it ran, by the cloud's own clock."""
        latest = [self.started_at, self.stop_requested_at]
        runs: list[Sequence[str | None]] = [*self.earlier_runs, latest]
        return bill_runs(Decimal(self.hourly_rate_usd), runs, now)

    def settle(self, now: datetime) -> None:
        if (
            self.state == "stopping"
            and self.stops_at
            and now >= datetime.fromisoformat(self.stops_at)
        ):
            self.state = "stopped"
        if (
            self.state == "pending"
            and self.starts_at
            and now >= datetime.fromisoformat(self.starts_at)
        ):
            self.state = "running"

    def start(self, now: datetime) -> None:
        """A stopped instance starts again, billing from `now`: `pending` until the cloud's
        next request finds it `running`."""
        self.earlier_runs.append([self.started_at, str(self.stop_requested_at)])
        self.started_at = self.starts_at = now.isoformat()
        self.stop_requested_at = self.stops_at = None
        self.state = "pending"

    def leave_running(self, now: datetime, state: str, delay_s: float) -> None:
        """Move to `state` (stopping or terminated), ending the bill if it was running."""
        if self.state in ("pending", "running"):
            self.stop_requested_at = now.isoformat()
        self.state = state
        self.stops_at = (now + timedelta(seconds=delay_s)).isoformat()
        self.settle(now)

    def spot_request(self) -> str | None:
        """The id of the Spot request a Spot Instance was launched by."""
        return f"sir-{self.id[2:10]}" if self.lifecycle == "spot" else None

    def xml(self) -> dict[str, Any]:
        names = ["/dev/sda1", *(f"/dev/sd{letter}" for letter in "fghijklmnop")]
        devices = [
            {
                "deviceName": name,
                "ebs": {
                    "volumeId": volume,
                    "status": "attached",
                    "deleteOnTermination": str(volume not in self.kept).lower(),
                },
            }
            for name, volume in zip(names, self.volumes, strict=False)
        ]
        return {
            "instanceId": self.id,
            "imageId": "ami-0fa4e0000000000aa",
            "instanceState": _state_xml(self.state),
            "instanceType": self.instance_type,
            "launchTime": self.started_at,
            "rootDeviceType": self.root_device_type,
            "rootDeviceName": "/dev/sda1",
            "instanceLifecycle": self.lifecycle,
            "spotInstanceRequestId": self.spot_request(),
            "blockDeviceMapping": devices,
            **(
                {"tagSet": [{"key": k, "value": v} for k, v in self.tags.items()]}
                if self.tags
                else {}
            ),
        }


@dataclass
class CloudState:
    instances: dict[str, CloudInstance] = field(default_factory=dict)
    actions: list[dict[str, Any]] = field(default_factory=list)  # every action, with params
    available: dict[str, int] = field(default_factory=dict)  # volumes attached to nothing: GiB

    @classmethod
    def restore(cls, saved: dict[str, Any]) -> CloudState:
        instances = {ref: CloudInstance(**i) for ref, i in saved.get("instances", {}).items()}
        return cls(
            instances=instances,
            actions=saved.get("actions", []),
            available=saved.get("available", {}),
        )

    def action_names(self) -> list[str]:
        return [a["action"] for a in self.actions]


class Ec2Error(Exception):
    """An EC2 error answer, raised while handling an action."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class FakeEc2(FakeCloud):
    """The cloud: its instances, their volumes and the Query API actions it answers."""

    provider = "aws"

    def __init__(
        self,
        state_file: Path,
        api_key: str = DEFAULT_SECRET_ACCESS_KEY,
        *,
        access_key_id: str = FAKE_ACCESS_KEY_ID,
        stop_delay_s: float = 0.0,
    ) -> None:
        super().__init__(state_file, api_key)
        self.access_key_id = access_key_id
        self.stop_delay_s = stop_delay_s
        self.page_size: int | None = None  # how many instances a DescribeInstances page holds
        self.costs: CostExplorer | None = None  # Cost Explorer, once enabled
        self.state = CloudState.restore(self.saved)

    def add_pod(self, ref: str, hourly_rate_usd: str) -> None:
        self.add_instance(ref, hourly_rate_usd)

    def explore_costs(self, factor: str = "1", lag_s: float = 0.0) -> CostExplorer:
        """Answers Cost Explorer's GetCostAndUsageWithResources, billing `factor` times the
        truth and `lag_s` late."""
        self.costs = CostExplorer(Decimal(factor), lag_s)
        return self.costs

    def add_instance(
        self,
        ref: str,
        hourly_rate_usd: str,
        *,
        instance_type: str = "g5.xlarge",
        lifecycle: str | None = None,
        spot_type: str = "persistent",
        root_device_type: str = "ebs",
        volumes: dict[str, int] | None = None,
        kept: Sequence[str] = (),
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """A running instance; an EBS-backed one gets a 100 GiB root volume by default, a
        Spot one (`lifecycle` "spot") a Spot request of `spot_type`; `kept` are those of its
        volumes not deleted on termination."""
        if not INSTANCE_ID.fullmatch(ref):
            raise ValueError(f"{ref!r} is not an EC2 instance id (i- and 8 or 17 hex digits)")
        if volumes is None:
            volumes = {f"vol-{ref[2:]}": 100} if root_device_type == "ebs" else {}
        with self.lock:
            if ref not in self.state.instances:
                self.state.instances[ref] = CloudInstance(
                    ref,
                    instance_type,
                    hourly_rate_usd,
                    self.clock().isoformat(),
                    volumes,
                    lifecycle=lifecycle,
                    spot_type=spot_type,
                    root_device_type=root_device_type,
                    kept=list(kept),
                    tags=dict(tags or {}),
                )
            self.save()

    def authorized(self, request: FakeRequest) -> bool:
        """Whether the request carries a valid SigV4 signature by this cloud's key pair."""
        signed = _AUTHORIZATION.fullmatch(request.headers.get("authorization", ""))
        if signed is None or signed["key"] != self.access_key_id:
            return False
        aws_request = AWSRequest(
            method=request.method,
            url=f"http://{request.headers.get('host', '')}{request.path}",
            data=request.raw,
            headers={name: request.headers.get(name, "") for name in signed["signed"].split(";")},
        )
        aws_request.context["timestamp"] = request.headers.get("x-amz-date", "")
        signer = SigV4Auth(
            Credentials(self.access_key_id, self.api_key), signed["service"], signed["region"]
        )
        canonical = signer.canonical_request(aws_request)
        expected = signer.signature(signer.string_to_sign(aws_request, canonical), aws_request)
        return hmac.compare_digest(expected, signed["signature"])

    def error(self, status: int, message: str) -> Reply:
        if status == 401:
            return _error_reply("AuthFailure", AUTH_FAILURE)
        codes = {v: k for k, v in ERROR_STATUS.items() if k != "RequestLimitExceeded"}
        code = codes.get(status, "InternalError" if status >= 500 else "InvalidRequest")
        return _error_reply(code, message, status)

    def rate_limited(self, retry_after: str) -> Reply:
        """EC2 throttles with 503 RequestLimitExceeded and no Retry-After."""
        return _error_reply("RequestLimitExceeded", "Request limit exceeded.")

    def canned(self, kind: str, arg: str) -> Reply | None:
        if kind == "truncated":
            body = f'<DescribeInstancesResponse xmlns="{NAMESPACE}"><reser'
            return Reply(200, text=body, content_type=XML)
        if kind == "ec2":
            code, _, message = arg.partition(":")
            return _error_reply(code, message or f"canned {code}")
        if kind == "no-capacity":
            return _error_reply("InsufficientInstanceCapacity", NO_CAPACITY, 500)
        return None

    def errors_for(self, request: FakeRequest) -> ErrorShapes:
        """Cost Explorer's requests (JSON, with an X-Amz-Target) fail in its words."""
        if self.costs is not None and request.headers.get("x-amz-target"):
            return self.costs
        return self

    def snapshot(self) -> dict[str, Any]:
        return asdict(self.state)

    def handle(self, request: FakeRequest) -> Reply:
        target = request.headers.get("x-amz-target", "")
        if target and self.costs is not None:
            self.state.actions.append({"action": target, "at": self.clock().isoformat()})
            return self.costs.answer(target, request.body, self.state.instances, self.clock())
        if request.method != "POST" or request.path != "/":
            return _error_reply("InvalidRequest", "The request received was invalid.")
        body = request.body if isinstance(request.body, str) else ""
        params = {name: values[0] for name, values in parse_qs(body).items()}
        action = params.get("Action", "")
        self.state.actions.append(
            {"action": action, "params": params, "at": self.clock().isoformat()}
        )
        actions = {
            "DescribeInstances": self._describe_instances,
            "DescribeVolumes": self._describe_volumes,
            "DescribeSpotInstanceRequests": self._describe_spot_requests,
            "DescribeInstanceTypes": self._describe_instance_types,
            "StopInstances": self._stop_instances,
            "StartInstances": self._start_instances,
            "TerminateInstances": self._terminate_instances,
        }
        if action not in actions:
            return _error_reply("InvalidAction", f"The action {action} is not valid.")
        for instance in self.state.instances.values():
            instance.settle(self.clock())
        try:
            return _response(action, actions[action](params))
        except Ec2Error as exc:
            return _error_reply(exc.code, str(exc))

    def _describe_instances(self, params: dict[str, str]) -> dict[str, Any]:
        """The instances named or, without ids, one page of them all; the NextToken is the
        offset of the next page."""
        chosen = self._instances(_numbered(params, "InstanceId"))
        next_token = None
        if not chosen:
            every = list(self.state.instances.values())
            start = int(params.get("NextToken", 0))
            size = int(params.get("MaxResults", 0)) or self.page_size or len(every)
            chosen = every[start : start + size]
            next_token = str(start + size) if start + size < len(every) else None
        reservations = [
            {"reservationId": f"r-{i.id[2:]}", "ownerId": "123456789012", "instancesSet": [i.xml()]}
            for i in chosen
        ]
        return {"reservationSet": reservations, "nextToken": next_token}

    def _describe_volumes(self, params: dict[str, str]) -> dict[str, Any]:
        sizes = {v: gb for i in self.state.instances.values() for v, gb in i.volumes.items()}
        every = {**self.state.available, **sizes}
        wanted = _numbered(params, "VolumeId") or list(every)
        for volume in wanted:
            if volume not in every:
                raise Ec2Error("InvalidVolume.NotFound", f"The volume '{volume}' does not exist.")
        volumes = [
            {
                "volumeId": v,
                "size": every[v],
                "volumeType": "gp3",
                "status": "in-use" if v in sizes else "available",
            }
            for v in wanted
        ]
        return {"volumeSet": volumes}

    def _describe_instance_types(self, params: dict[str, str]) -> dict[str, Any]:
        wanted = _numbered(params, "InstanceType") or list(INSTANCE_TYPES)
        unknown = [kind for kind in wanted if kind not in INSTANCE_TYPES]
        if unknown:
            raise Ec2Error(
                "InvalidInstanceType",
                f"The following supplied instance types do not exist: [{', '.join(unknown)}]",
            )
        return {"instanceTypeSet": [_instance_type(kind) for kind in wanted]}

    def _describe_spot_requests(self, params: dict[str, str]) -> dict[str, Any]:
        spot = {str(i.spot_request()): i for i in self.state.instances.values() if i.spot_request()}
        wanted = _numbered(params, "SpotInstanceRequestId") or list(spot)
        for request in wanted:
            if request not in spot:
                raise Ec2Error(
                    "InvalidSpotInstanceRequestID.NotFound",
                    f"The spot instance request ID '{request}' does not exist",
                )
        requests = [
            {
                "spotInstanceRequestId": r,
                "instanceId": spot[r].id,
                "type": spot[r].spot_type,
                "state": "active",
            }
            for r in wanted
        ]
        return {"spotInstanceRequestSet": requests}

    def _stop_instances(self, params: dict[str, str]) -> dict[str, Any]:
        changes = []
        for instance in self._instances(_numbered(params, "InstanceId")):
            if instance.root_device_type != "ebs":
                raise Ec2Error(
                    "UnsupportedOperation",
                    f"The instance '{instance.id}' does not have an 'ebs' root device type "
                    "and cannot be stopped.",
                )
            if instance.spot_type == "one-time" and instance.spot_request():
                raise Ec2Error(
                    "UnsupportedOperation",
                    f"You can't stop the Spot Instance '{instance.id}' because it is associated "
                    "with a one-time Spot Instance request. You can only stop Spot Instances "
                    "associated with persistent Spot Instance requests.",
                )
            if instance.state not in ("running", "stopping", "stopped"):
                raise Ec2Error(
                    "IncorrectInstanceState",
                    f"The instance '{instance.id}' is not in a state from which it can be stopped.",
                )
            before = instance.state
            if before == "running":
                instance.leave_running(self.clock(), "stopping", self.stop_delay_s)
            changes.append(_change(instance, before))
        return {"instancesSet": changes}

    def _start_instances(self, params: dict[str, str]) -> dict[str, Any]:
        changes = []
        for instance in self._instances(_numbered(params, "InstanceId")):
            if instance.state not in ("pending", "running", "stopped"):
                raise Ec2Error(
                    "IncorrectInstanceState",
                    f"The instance '{instance.id}' is not in a state from which it can be started.",
                )
            before = instance.state
            if before == "stopped":
                instance.start(self.clock())
            changes.append(_change(instance, before))
        return {"instancesSet": changes}

    def _terminate_instances(self, params: dict[str, str]) -> dict[str, Any]:
        changes = []
        for instance in self._instances(_numbered(params, "InstanceId")):
            before = instance.state
            instance.leave_running(self.clock(), "terminated", 0.0)
            kept = {v: gb for v, gb in instance.volumes.items() if v in instance.kept}
            self.state.available.update(kept)  # the rest, deleteOnTermination: gone
            instance.volumes = {}
            changes.append(_change(instance, before))
        return {"instancesSet": changes}

    def _instances(self, refs: list[str]) -> list[CloudInstance]:
        """The instances named, or EC2's error for the first malformed or unknown id."""
        for ref in refs:
            if not INSTANCE_ID.fullmatch(ref):
                raise Ec2Error("InvalidInstanceID.Malformed", f'Invalid id: "{ref}"')
            if ref not in self.state.instances:
                raise Ec2Error(
                    "InvalidInstanceID.NotFound", f"The instance ID '{ref}' does not exist"
                )
        return [self.state.instances[ref] for ref in refs]


def _numbered(params: dict[str, str], name: str) -> list[str]:
    """The values of a Query API list: Name.1, Name.2, ... in order."""
    values, n = [], 1
    while f"{name}.{n}" in params:
        values.append(params[f"{name}.{n}"])
        n += 1
    return values


def _instance_type(kind: str) -> dict[str, Any]:
    store = INSTANCE_TYPES[kind]
    answer: dict[str, Any] = {"instanceType": kind, "instanceStorageSupported": "false"}
    if store is not None:
        count, gb, disk, nvme = store
        answer["instanceStorageSupported"] = "true"
        answer["instanceStorageInfo"] = {
            "totalSizeInGB": count * gb,
            "disks": [{"sizeInGB": gb, "count": count, "type": disk}],
            "nvmeSupport": nvme,
        }
    return answer


def _state_xml(state: str) -> dict[str, Any]:
    return {"code": STATE_CODES[state], "name": state}


def _change(instance: CloudInstance, before: str) -> dict[str, Any]:
    return {
        "instanceId": instance.id,
        "currentState": _state_xml(instance.state),
        "previousState": _state_xml(before),
    }


def _response(action: str, content: dict[str, Any]) -> Reply:
    root = ET.Element(f"{action}Response", xmlns=NAMESPACE)
    _fill(root, {"requestId": str(uuid.uuid4()), **content})
    return Reply(200, text=ET.tostring(root, encoding="unicode"), content_type=XML)


def _error_reply(code: str, message: str, status: int | None = None) -> Reply:
    root = ET.Element("Response")
    _fill(root, {"Errors": {"Error": {"Code": code, "Message": message}}})
    _fill(root, {"RequestID": str(uuid.uuid4())})
    text = ET.tostring(root, encoding="unicode")
    return Reply(status or ERROR_STATUS.get(code, 400), text=text, content_type=XML)


def _fill(parent: ET.Element, value: Any) -> None:
    """Nested dicts as elements, lists as EC2's <item> sequences; None leaves it out."""
    if isinstance(value, dict):
        for name, child in value.items():
            if child is not None:
                _fill(ET.SubElement(parent, name), child)
    elif isinstance(value, list):
        for item in value:
            _fill(ET.SubElement(parent, "item"), item)
    else:
        parent.text = str(value)


def main(argv: list[str] | None = None) -> None:
    http_cloud.main(FakeEc2, DEFAULT_SECRET_ACCESS_KEY, argv, path="/")


if __name__ == "__main__":
    main()
