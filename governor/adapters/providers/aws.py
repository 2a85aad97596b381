"""AWS EC2 through boto3: read an instance's state, rate and EBS storage, stop it keeping its
EBS volumes, start it again on them, and terminate the instances no stop call works for.

DescribeInstances, DescribeVolumes, DescribeSpotInstanceRequests, DescribeInstanceTypes,
StopInstances, StartInstances and TerminateInstances are sent, the stop without Hibernate or
Force. A start that EC2 accepted (the instance `pending`) is done; InsufficientInstanceCapacity,
which EC2 answers as a server error, is a permanent refusal in EC2's words. Listing the
account's instances is DescribeInstances without ids, page by page, then one DescribeVolumes
for all their volumes, one DescribeSpotInstanceRequests for all their Spot requests and one
DescribeInstanceTypes for the types of those with nothing but an EBS root.

What a stop loses is described (`cannot_preserve`): an instance whose root device is instance
store cannot be stopped at all (EC2 refuses, and its data would not survive anyway), nor can a
Spot Instance launched by a one-time Spot request (EC2 refuses it with UnsupportedOperation:
only a persistent request's instance stops), so both are `terminate_only` and `stop` never
tries them; should EC2 refuse a stop that way all the same, the refusal is permanent, in its
own words. An EBS-root instance whose only other disks are NVMe instance store (its type's
InstanceStorageInfo; EC2 attaches those at launch, whatever the block device mapping says)
stops, but their data is lost. `terminate` is for terminate-only pods alone, and only while
the EBS volume to keep is attached with DeleteOnTermination false: terminating deletes every
volume marked to be deleted with the instance, and everything on instance store.

EC2's API carries no prices: the hourly rate comes from a table keyed by instance type. The
client makes a single attempt per call, since the governor's scheduler does the retrying, and
errors are classified in one place, `_refused`, by the error codes EC2 documents (its API
reference's "Error codes" page): throttling, 5xx, timeouts and unreadable answers are retryable,
everything else permanent. EC2 throttles with RequestLimitExceeded and no Retry-After, so
`retry_after_s` is always None. Every message is masked of the credentials.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

import boto3
from botocore import exceptions as boto
from botocore import xform_name
from botocore.client import BaseClient
from botocore.config import Config
from botocore.parsers import ResponseParserError

from governor.adapters.providers._http import redact
from governor.domain.model import PodState
from governor.domain.ports import (
    CallOutcome,
    CallResult,
    Listed,
    PodDescription,
    ProviderError,
    Seen,
    Storage,
)

# StopInstances puts the instance in `stopping` at once, and EC2 bills neither stopping nor
# stopped instances; this leaves room for the call to take effect.
STOP_LATENCY_S = 30.0
EBS_USD_PER_GB_MONTH = Decimal("0.08")  # gp3 list price in us-east-1; EBS bills stopped too
# Every value of the EC2 model's InstanceStateName enum (botocore's ec2 2016-11-15 model); a
# state outside it is unknown (`Seen`): never running or stopped by guess, and no call is sent.
STATES = {
    "pending": PodState.RUNNING,
    "running": PodState.RUNNING,
    "stopping": PodState.STOPPING,
    "shutting-down": PodState.STOPPING,
    "stopped": PodState.STOPPED,
    "terminated": PodState.GONE,
}
# EC2's documented error codes, each classed as retrying may help or not.
THROTTLED = frozenset(  # LimitExceededException is Cost Explorer's "too many calls"
    {"RequestLimitExceeded", "Throttling", "ThrottlingException", "LimitExceededException"}
)
UNAVAILABLE = frozenset({"InternalError", "ServiceUnavailable", "Unavailable"})
CREDENTIALS_REFUSED = frozenset(
    {
        "AuthFailure",
        "UnauthorizedOperation",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "Blocked",
        "OptInRequired",
        "PendingVerification",
    }
)
NOT_FOUND = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})
NO_CAPACITY = frozenset({"InsufficientInstanceCapacity", "InsufficientHostCapacity"})
TYPES_PER_CALL = 100  # DescribeInstanceTypes' InstanceTypes: at most 100 (its model's max)
UNSUPPORTED = "UnsupportedOperation"  # e.g. a stop of a one-time Spot request's instance
CANNOT_PRESERVE = (
    "its root device is an instance store, which EC2 cannot stop; "
    "the data on it would be lost when the instance ends. Launch it from an EBS-backed AMI "
    "instead, or keep checkpoints on an EBS volume not deleted on termination"
)
ONE_TIME_SPOT = (
    "it is a Spot Instance of a one-time Spot request, which EC2 cannot stop "
    "(only terminate), losing its root volume. Launch it from a persistent Spot request "
    "(interruption behaviour stop) instead, or keep checkpoints on an EBS volume not deleted "
    "on termination"
)
INSTANCE_STORE_ONLY = (
    "its only disks besides the EBS root volume are {store} of instance store, which EC2 "
    "erases when the instance stops. Attach an EBS volume for the workspace (EBS volumes "
    "survive a stop)"
)


def client_config(timeout_s: float) -> Config:
    """One attempt per call (the governor's scheduler retries), bounded by `timeout_s`."""
    return Config(
        retries={"mode": "standard", "total_max_attempts": 1},
        connect_timeout=min(5.0, timeout_s),
        read_timeout=timeout_s,
    )


class InstanceNotFound(ProviderError):
    def __init__(self, ref: str, why: str) -> None:
        super().__init__(f"aws has no such instance {ref!r} ({why})", retryable=False)


class WrongState(ProviderError):
    """EC2's IncorrectInstanceState: the instance is in no state to do what was asked."""


class Ec2Provider:
    """Implements StopsPreserving, Resumes and ListsPods against EC2's Query API, through a
    boto3 EC2 client; and TerminateOnly, for the pods no stop call works for.

    `rates` maps an instance type to its $/hour, and "<type>:spot" to its spot rate;
    `secrets` are masked in every message (the access key id, secret key, session token).
    """

    def __init__(
        self,
        client: BaseClient,
        *,
        rates: Mapping[str, Decimal] | None = None,
        ebs_usd_per_gb_month: Decimal = EBS_USD_PER_GB_MONTH,
        stop_latency_s: float = STOP_LATENCY_S,
        secrets: Iterable[str | None] = (),
    ) -> None:
        self.stop_latency_s = stop_latency_s
        self._client = client
        self._rates = dict(rates or {})
        self._ebs_rate = ebs_usd_per_gb_month
        self._secrets = tuple(s for s in secrets if s)

    @classmethod
    def connect(
        cls,
        region: str,
        *,
        endpoint_url: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        timeout_s: float = 10.0,
        session: boto3.session.Session | None = None,
        **options: Any,
    ) -> Ec2Provider:
        """An adapter with its own EC2 client for `region`: one attempt per call, each
        bounded by `timeout_s`. Without explicit keys, boto3's usual credential chain
        (environment, shared files, instance role) applies. `session` is the boto3 session
        to build the client from (default: a new one; sharing one spares reloading EC2's
        API model). `options` go to the adapter."""
        session = session or boto3.session.Session()
        client = session.client(
            "ec2",
            region_name=region,
            endpoint_url=endpoint_url,
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            config=client_config(timeout_s),
        )
        secrets: list[str | None] = [access_key_id, secret_access_key]
        if access_key_id is None and secret_access_key is None:
            found = session.get_credentials()  # what the chain gave the client
            frozen = found.get_frozen_credentials() if found else None
            if frozen:
                secrets += [frozen.access_key, frozen.secret_key, frozen.token]
        return cls(client, secrets=secrets, **options)

    def describe(self, ref: str) -> PodDescription:
        instance = self._instance(ref)
        sizes = self._volume_sizes(_volume_ids(instance))
        return self._description(
            instance, sizes, self._one_time_spot([instance]), self._instance_stores([instance])
        )

    def pods(self) -> list[Listed]:
        """Every instance the credentials can see, stopped ones included (their EBS volumes
        still bill); terminated ones are gone, though EC2 shows them for a while."""
        instances: list[dict[str, Any]] = []
        params: dict[str, Any] = {}  # the request's parameters, as `_call` takes them
        while True:
            answer = self._call("DescribeInstances", **params)
            instances += [i for i in self._instances(answer) if i["State"]["Name"] != "terminated"]
            if not answer.get("NextToken"):
                break
            params = {"NextToken": answer["NextToken"]}
        sizes = self._volume_sizes([v for i in instances for v in _volume_ids(i)])
        one_time = self._one_time_spot(instances)
        stores = self._instance_stores(instances)
        return [_listed(i, self._description(i, sizes, one_time, stores)) for i in instances]

    def _description(
        self,
        instance: dict[str, Any],
        sizes: Mapping[str, int],
        one_time: set[str],
        stores: Mapping[str, str],
    ) -> PodDescription:
        """The instance as a pod; `sizes` has the GiB of (at least) its EBS volumes, which
        survive a stop and bill while stopped; `one_time` the ids of (at least) its one-time
        Spot Instances; `stores` the instance store of (at least) its type, if it has one.
        Its filesystems are the EBS volumes that survive its termination; where the system
        mounted them, EC2 cannot say."""
        gib = [sizes[volume] for volume in _volume_ids(instance)]
        cannot_stop = _cannot_stop(instance, one_time)
        store = stores.get(str(instance.get("InstanceType")))
        lost = cannot_stop or (
            INSTANCE_STORE_ONLY.format(store=store)
            if store and _nothing_but_the_root(instance)
            else None
        )
        return Seen.of(STATES, instance["State"]["Name"]).describing(
            self._rate(instance),
            Storage(Decimal(sum(gib)), self._ebs_rate, self._ebs_rate) if gib else None,
            filesystems=dict.fromkeys(_kept_on_termination(instance)),
            cannot_preserve=lost,
            terminate_only=cannot_stop is not None,
        )

    def _instance_stores(self, instances: list[dict[str, Any]]) -> dict[str, str]:
        """The NVMe instance store of the types of those of `instances` with an EBS root and
        no other EBS volume (EC2 attaches such volumes to every instance of the type), as
        people read it ("250 GB NVMe SSD"), in one DescribeInstanceTypes call per 100 types;
        a type without one is left out."""
        kinds = sorted(
            {
                str(i.get("InstanceType"))
                for i in instances
                if i.get("RootDeviceType") == "ebs" and _nothing_but_the_root(i)
            }
        )
        stores: dict[str, str] = {}
        for start in range(0, len(kinds), TYPES_PER_CALL):
            answer = self._call(
                "DescribeInstanceTypes", InstanceTypes=kinds[start : start + TYPES_PER_CALL]
            )
            for kind in answer.get("InstanceTypes") or []:
                info = kind.get("InstanceStorageInfo") or {}
                gb = info.get("TotalSizeInGB")
                nvme = info.get("NvmeSupport") in ("required", "supported")
                if kind.get("InstanceStorageSupported") and nvme and isinstance(gb, int) and gb:
                    stores[str(kind.get("InstanceType"))] = _store(gb, info.get("Disks") or [])
        return stores

    def _one_time_spot(self, instances: list[dict[str, Any]]) -> set[str]:
        """The ids of those of `instances` that are Spot Instances of a one-time Spot request
        (EC2's default type), read in one DescribeSpotInstanceRequests call; a Spot
        Instance whose request EC2 does not name is taken for one-time."""
        spot = [i for i in instances if i.get("InstanceLifecycle") == "spot"]
        requests = sorted(
            {str(i["SpotInstanceRequestId"]) for i in spot if i.get("SpotInstanceRequestId")}
        )
        persistent: set[str] = set()
        if requests:
            answer = self._call("DescribeSpotInstanceRequests", SpotInstanceRequestIds=requests)
            persistent = {
                str(r.get("SpotInstanceRequestId"))
                for r in answer.get("SpotInstanceRequests") or []
                if r.get("Type") == "persistent"
            }
        return {i["InstanceId"] for i in spot if i.get("SpotInstanceRequestId") not in persistent}

    def stop(self, ref: str) -> CallResult:
        try:
            instance = self._instance(ref)
            state = instance["State"]["Name"]
            if (settled := _settled(state)) is not None:
                return settled
            if why := _cannot_stop(instance, self._one_time_spot([instance])):
                return CallResult(CallOutcome.PERMANENT, f"aws will not stop {ref}: {why}")
            answer = self._call("StopInstances", InstanceIds=[ref], ref=ref)
        except InstanceNotFound:
            return CallResult(CallOutcome.DONE, "already gone")
        except WrongState as exc:
            return self._reread(ref, exc, _settled)
        except ProviderError as exc:
            return CallResult.failed(exc)
        current = _current(answer, "StoppingInstances", ref)
        if current is None:
            return CallResult.failed(self._unreadable("StopInstances"))
        if current == "stopped":
            return CallResult(CallOutcome.DONE, "stopped; EBS volumes kept")
        return CallResult(CallOutcome.PENDING, f"StopInstances accepted; {current}")

    def terminate(self, ref: str, *, keep: str) -> CallResult:
        """Terminates an instance no stop call works for (any other is refused), only while
        the EBS volume `keep` (which holds the checkpoint) is attached and not deleted on
        termination."""
        try:
            instance = self._instance(ref)
            if (settled := _settled(instance["State"]["Name"])) is not None:
                return settled
            if _cannot_stop(instance, self._one_time_spot([instance])) is None:
                return CallResult(
                    CallOutcome.PERMANENT,
                    f"aws will not terminate {ref}: it can be stopped, keeping its EBS volumes",
                )
            kept = _kept_on_termination(instance)
            if keep not in kept:
                return CallResult(
                    CallOutcome.PERMANENT,
                    f"aws will not terminate {ref}: EBS volume {keep!r} is not attached with "
                    "DeleteOnTermination false (volumes that survive: "
                    f"{', '.join(kept) or 'none'}), so the checkpoint would be lost",
                )
            answer = self._call("TerminateInstances", InstanceIds=[ref], ref=ref)
        except InstanceNotFound:
            return CallResult(CallOutcome.DONE, "already gone")
        except ProviderError as exc:
            return CallResult.failed(exc)
        current = _current(answer, "TerminatingInstances", ref)
        if current is None:
            return CallResult.failed(self._unreadable("TerminateInstances"))
        if current == "terminated":
            return CallResult(CallOutcome.DONE, f"terminated; EBS volume {keep} kept")
        return CallResult(CallOutcome.PENDING, f"TerminateInstances accepted; {current}")

    def resume(self, ref: str) -> CallResult:
        """Starts a stopped instance; one that is gone, or on its way out, cannot start."""
        try:
            if (started := _started(self._instance(ref)["State"]["Name"])) is not None:
                return started
            answer = self._call("StartInstances", InstanceIds=[ref], ref=ref)
        except WrongState as exc:
            return self._reread(ref, exc, _started)
        except ProviderError as exc:
            return CallResult.failed(exc)
        current = _current(answer, "StartingInstances", ref)
        if current is None:
            return CallResult.failed(self._unreadable("StartInstances"))
        return CallResult(CallOutcome.DONE, f"StartInstances accepted; {current}")

    def _reread(
        self, ref: str, refused: WrongState, settled: Callable[[str], CallResult | None]
    ) -> CallResult:
        """After IncorrectInstanceState: the state now says whether the call is moot."""
        try:
            state = self._instance(ref)["State"]["Name"]
        except InstanceNotFound:
            state = "terminated"  # EC2 forgets a terminated instance after a while
        except ProviderError as exc:
            return CallResult.failed(exc)
        return settled(state) or CallResult(CallOutcome.RETRYABLE, f"{refused} (it is {state})")

    def _instance(self, ref: str) -> dict[str, Any]:
        answer = self._call("DescribeInstances", InstanceIds=[ref], ref=ref)
        found = [i for i in self._instances(answer) if i.get("InstanceId") == ref]
        if not found:
            raise InstanceNotFound(ref, "not in the DescribeInstances answer")
        return found[0]

    def _instances(self, answer: dict[str, Any]) -> list[dict[str, Any]]:
        """The instances of a DescribeInstances answer, each with a state name."""
        reservations = answer.get("Reservations")
        if not isinstance(reservations, list):
            raise self._unreadable("DescribeInstances")
        found = [i for r in reservations for i in r.get("Instances", [])]
        if any(not isinstance(i.get("State", {}).get("Name"), str) for i in found):
            raise self._unreadable("DescribeInstances")
        return found

    def _rate(self, instance: dict[str, Any]) -> Decimal | None:
        """The table's rate for the instance type: for a spot instance its spot rate if
        known, else the on-demand rate (by default spot never costs more than on-demand)."""
        kind = str(instance.get("InstanceType"))
        if instance.get("InstanceLifecycle") == "spot" and f"{kind}:spot" in self._rates:
            return self._rates[f"{kind}:spot"]
        return self._rates.get(kind)

    def _volume_sizes(self, volumes: list[str]) -> dict[str, int]:
        """The GiB of each EBS volume named, in one DescribeVolumes call."""
        if not volumes:
            return {}  # DescribeVolumes without ids would list every volume
        answer = self._call("DescribeVolumes", VolumeIds=sorted(set(volumes)))
        sizes = {v.get("VolumeId"): v.get("Size") for v in answer.get("Volumes") or []}
        if not set(volumes) <= sizes.keys() or not all(isinstance(s, int) for s in sizes.values()):
            raise self._unreadable("DescribeVolumes")
        return sizes

    def _call(
        self, action: str, *, ref: str | None = None, via: BaseClient | None = None, **params: Any
    ) -> dict[str, Any]:
        """One EC2 action (or one of `via`, another AWS service's client), with every failure
        as the ProviderError it amounts to; `ref` is the instance it is about, if it is."""
        try:
            answer = getattr(via or self._client, xform_name(action))(**params)
        except boto.ClientError as exc:
            raise self._refused(action, ref, exc) from None
        except ResponseParserError as exc:
            raise self._unreadable(action, str(exc)) from None
        except (boto.ReadTimeoutError, boto.ConnectTimeoutError) as exc:
            raise self._error(f"timed out on {action} ({type(exc).__name__})", True) from None
        except (boto.HTTPClientError, boto.ConnectionError) as exc:
            raise self._error(f"unreachable for {action} ({exc})", True) from None
        except (boto.NoCredentialsError, boto.PartialCredentialsError) as exc:
            raise self._error(f"has no usable credentials ({exc})", False) from None
        except boto.BotoCoreError as exc:
            raise self._error(f"failed {action} ({type(exc).__name__}: {exc})", True) from None
        return answer

    def _refused(self, action: str, ref: str | None, exc: boto.ClientError) -> ProviderError:
        """An EC2 error answer as the error it amounts to."""
        error = exc.response.get("Error", {})
        code, said = str(error.get("Code", "")), str(error.get("Message", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        detail = f"HTTP {status} {code}: {said}"[:300]
        if code in NOT_FOUND and ref is not None:
            return InstanceNotFound(ref, code)
        if code == "IncorrectInstanceState":
            return WrongState(self._text(f"refused {action} ({detail})"), retryable=False)
        if code == UNSUPPORTED:  # documented and final, e.g. a one-time Spot Instance's stop
            return self._error(f"cannot {action} at all ({detail})", False, status)
        if code in NO_CAPACITY:  # EC2 answers these with a 5xx, but retrying will not help
            return self._error(f"has no capacity for {action} ({detail})", False, status)
        if code in THROTTLED:
            return self._error(f"rate limited {action} ({detail})", True, status)
        if code in UNAVAILABLE or (status or 0) >= 500:
            return self._error(f"failed {action} on its side ({detail})", True, status)
        if code in CREDENTIALS_REFUSED:
            return self._error(f"refused the credentials for {action} ({detail})", False, status)
        return self._error(f"refused {action} ({detail})", False, status)

    def _unreadable(self, action: str, why: str = "") -> ProviderError:
        said = f": {why[:200]!r}" if why else ""
        return self._error(f"answered {action} with a body that is not EC2's XML{said}", True)

    def _error(self, message: str, retryable: bool, status: int | None = None) -> ProviderError:
        return ProviderError(self._text(message), retryable=retryable, status=status)

    def _text(self, message: str) -> str:
        return redact(f"aws {message}", *self._secrets)


def _volume_ids(instance: dict[str, Any]) -> list[str]:
    return [
        m["Ebs"]["VolumeId"]
        for m in instance.get("BlockDeviceMappings", [])
        if m.get("Ebs", {}).get("VolumeId")
    ]


def _kept_on_termination(instance: dict[str, Any]) -> list[str]:
    """The EBS volumes that survive the instance's termination (DeleteOnTermination false)."""
    return [
        m["Ebs"]["VolumeId"]
        for m in instance.get("BlockDeviceMappings", [])
        if m.get("Ebs", {}).get("VolumeId") and m["Ebs"].get("DeleteOnTermination") is False
    ]


def _nothing_but_the_root(instance: dict[str, Any]) -> bool:
    """Whether no EBS volume but the root one is attached."""
    root = instance.get("RootDeviceName")
    return all(m.get("DeviceName") == root for m in instance.get("BlockDeviceMappings", []))


def _store(gb: int, disks: list[dict[str, Any]]) -> str:
    """Instance store as people read it: "2 x 1900 GB NVMe SSD" (its total where one kind)."""
    kinds = [
        f"{d.get('Count')} x {d.get('SizeInGB')} GB NVMe {str(d.get('Type')).upper()}"
        for d in disks
    ]
    return ", ".join(kinds) if kinds else f"{gb} GB"


def _cannot_stop(instance: dict[str, Any], one_time: set[str]) -> str | None:
    """Why no stop call works for the instance (EC2 can only terminate it); None if one does."""
    if instance.get("RootDeviceType") == "instance-store":
        return CANNOT_PRESERVE
    return ONE_TIME_SPOT if instance.get("InstanceId") in one_time else None


def _current(answer: dict[str, Any], changes: str, ref: str) -> str | None:
    """The state a Stop/StartInstances answer says `ref` is in now; None if it does not."""
    mine = [c for c in answer.get(changes) or [] if c.get("InstanceId") == ref]
    return mine[0].get("CurrentState", {}).get("Name") if mine else None


def _settled(state: str) -> CallResult | None:
    """What a stop amounts to for an instance already on its way down, or in a state EC2
    does not document; None if it is up."""
    if state not in STATES:
        return Seen.of(STATES, state).unknown()
    if state in ("stopped", "terminated"):
        return CallResult(CallOutcome.DONE, f"already {state}")
    if state in ("stopping", "shutting-down"):
        return CallResult(CallOutcome.PENDING, f"already {state}")
    return None


def _started(state: str) -> CallResult | None:
    """What a resume amounts to for an instance that is not stopped, or in a state EC2 does
    not document; None if it is."""
    if state not in STATES:
        return Seen.of(STATES, state).unknown(CallOutcome.RETRYABLE)
    if state in ("pending", "running"):
        return CallResult(CallOutcome.DONE, f"already {state}")
    if state == "stopping":
        return CallResult(CallOutcome.RETRYABLE, "still stopping; it can start once stopped")
    if state in ("shutting-down", "terminated"):
        return CallResult(CallOutcome.PERMANENT, f"aws instance is {state}: it cannot start")
    return None


NAME_TAG = "Name"  # the tag EC2's console shows as an instance's name


def _listed(instance: dict[str, Any], description: PodDescription) -> Listed:
    """An instance as listed: its tags (the `Name` tag its name). DescribeInstances names
    the instance type, not its GPUs, so the listing says none."""
    tags = {
        str(t["Key"]): str(t.get("Value", ""))
        for t in instance.get("Tags") or []
        if isinstance(t, dict) and "Key" in t
    }
    return Listed(str(instance["InstanceId"]), description, name=tags.get(NAME_TAG), labels=tags)
