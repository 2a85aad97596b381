"""What the core needs from the outside world, stated as protocols the shell implements."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Protocol, runtime_checkable

from governor.domain.identity import Authorization, DeviceCode, Vouched
from governor.domain.model import PodState
from governor.domain.text import visible

RAW_STATE_CHARS = 64  # how much of a provider's state word is kept, shown as `visible` writes it


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


@dataclass(frozen=True)
class Storage:
    """A pod's persistent storage and what it costs per GB-month, running and stopped."""

    gb: Decimal
    usd_per_gb_month: Decimal
    stopped_usd_per_gb_month: Decimal


@dataclass(frozen=True)
class PodDescription:
    """What a provider says about one pod. `None` means the provider does not say.

    `filesystems` maps each persistent filesystem attached to the pod (one a terminate
    keeps) to where it is mounted, None where the provider cannot know (EC2 knows an EBS
    volume's device, not where the system mounted it); `cannot_preserve` says what a stop
    would lose and how to keep it instead (an instance-store disk, a locked pod, an
    ephemeral volume), None when nothing would be lost; `terminate_only` that no stop call
    works for this pod at all (a one-time Spot instance): the provider can only terminate it.

    `provider_state` is the pod's state as the provider spelled it (None: the provider has
    no single word for it); `state_known` False when that word is none the provider
    documents, and then `state` is the safe default, RUNNING (see `Seen`).
    """

    state: PodState
    hourly_rate_usd: Decimal | None
    storage: Storage | None = None
    filesystems: Mapping[str, str | None] = field(default_factory=dict)
    cannot_preserve: str | None = None
    provider_state: str | None = None
    state_known: bool = True
    terminate_only: bool = False


@dataclass(frozen=True)
class Billed:
    """What a provider has billed for one pod, and the instant that figure runs to.

    `since` None: everything billed so far (compared from a baseline figure); otherwise the
    amount is what was billed from `since` to `through` (a window of the provider's bill)."""

    amount_usd: Decimal
    through: datetime
    since: datetime | None = None


class CallOutcome(StrEnum):
    DONE = "done"  # stopped, already stopped, or already gone
    PENDING = "pending"  # accepted, not finished yet: ask again later
    RETRYABLE = "retryable"  # failed in a way that may pass (timeouts, 429, 5xx)
    PERMANENT = "permanent"  # failed in a way that will not pass by retrying


@dataclass(frozen=True)
class CallResult:
    outcome: CallOutcome
    detail: str = ""
    retry_after_s: float | None = None  # how long the provider asked us to wait, if it said
    # the pod's state as the provider spelled it, where the call read one; `state_known`
    # False when it is none the provider documents (then never DONE: see `Seen.unknown`)
    provider_state: str | None = None
    state_known: bool = True

    @classmethod
    def failed(cls, error: ProviderError) -> CallResult:
        """The result a failed provider call amounts to."""
        outcome = CallOutcome.RETRYABLE if error.retryable else CallOutcome.PERMANENT
        return cls(outcome, str(error), error.retry_after_s)


class ProviderError(Exception):
    """A provider call that failed; `retryable` says whether trying again may help,
    `retry_after_s` how long the provider asked to wait first (None: it did not say) and
    `status` the HTTP status it answered with (None: no answer, or not over HTTP)."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        retry_after_s: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.status = status


@dataclass(frozen=True)
class Seen:
    """A pod's state as its provider spelled it (`raw`) and what it means here (`state`).

    One the provider does not document (`known` False) is never taken for stopped: it means
    RUNNING, so its compute accrues and its stop order goes on asking, until a state the
    provider documents arrives."""

    raw: str
    state: PodState
    known: bool = True

    @classmethod
    def of(cls, states: Mapping[str, PodState], raw: object) -> Seen:
        """`raw` read through `states`, the provider's documented states."""
        state = states.get(raw) if isinstance(raw, str) else None
        return cls(spelled(raw), state or PodState.RUNNING, state is not None)

    def describing(
        self,
        hourly_rate_usd: Decimal | None,
        storage: Storage | None = None,
        filesystems: Mapping[str, str | None] | None = None,
        cannot_preserve: str | None = None,
        terminate_only: bool = False,
    ) -> PodDescription:
        return PodDescription(
            self.state,
            hourly_rate_usd,
            storage,
            {} if filesystems is None else filesystems,
            cannot_preserve,
            terminate_only=terminate_only,
            provider_state=self.raw,
            state_known=self.known,
        )

    def unknown(self, outcome: CallOutcome = CallOutcome.PENDING) -> CallResult:
        """What a stop (PENDING: asked again at the next pass) or a resume (RETRYABLE) that
        found this undocumented state answers, having sent nothing."""
        return CallResult(
            outcome,
            f"the provider says the pod is {self.raw!r}, a state it does not document; "
            "nothing was sent, and it is asked again later",
            provider_state=self.raw,
            state_known=False,
        )


def spelled(raw: object) -> str:
    """A provider's state word as it is kept: shown as it is, cut to RAW_STATE_CHARS."""
    word = raw if isinstance(raw, str) else repr(raw)
    return visible(word)[:RAW_STATE_CHARS]


class Provider(Protocol):
    """What every provider can do: say what a pod is and costs. `stop_latency_s` is how
    long a pod may keep billing after the governor asks for it to stop."""

    stop_latency_s: float

    def describe(self, ref: str) -> PodDescription: ...


@runtime_checkable
class StopsPreserving(Provider, Protocol):
    """A provider that can stop a pod while keeping its persistent workspace.

    `stop` is idempotent: a pod that is already stopped, or already gone, is DONE. Such a
    provider has no way to terminate or delete anything.
    """

    def stop(self, ref: str) -> CallResult: ...


@runtime_checkable
class TerminateOnly(Provider, Protocol):
    """A provider that can terminate a pod, losing its own disks: all it can do for some
    providers (Lambda), and for some pods of a provider that otherwise stops them (a one-time
    Spot instance on EC2, which then also implements StopsPreserving).

    The governor terminates only a pod registered as terminate-only, and only after the job
    acknowledged a checkpoint on the persistent filesystem named at registration;
    `terminate` refuses (PERMANENT) unless `keep` is still attached to the pod and survives
    its termination. Already terminated or gone is DONE.
    """

    def terminate(self, ref: str, *, keep: str) -> CallResult: ...


@runtime_checkable
class Resumes(Protocol):
    """A provider that can start a stopped pod again, on the workspace its stop kept.

    `resume` is idempotent: DONE once the provider has accepted the start or the pod is
    already running (or starting), so it bills from then on; RETRYABLE as for a stop (rate
    limits, 5xx, timeouts, malformed answers); PERMANENT when the provider refuses (no
    capacity, a pod that is gone or was never there), with the provider's words in `detail`.
    """

    def resume(self, ref: str) -> CallResult: ...


@runtime_checkable
class Locates(Protocol):
    """A provider that says where a pod runs: its region (None: it does not say). A pod's
    stop latency is learned from the stops of its provider and region together."""

    def region_of(self, ref: str) -> str | None: ...


@runtime_checkable
class NamesCredential(Protocol):
    """A provider that says which of several credentials it found (never the secret)."""

    credential: str


@runtime_checkable
class ReportsBilling(Protocol):
    """A provider that says what it has billed so far (it lags the meter) for each pod of
    `since`, read from the account as a whole: the calls a read costs do not grow with the
    pods asked about (a fleet's worth of per-pod calls would outrun the provider's rate
    limits). `since` maps each pod's ref to the instant its bill counts from (its
    registration): a provider that keeps its bill in periods counts the period holding that
    instant, and every later one, whole, so that the same pod's figure only ever grows
    however old the pod, and whatever else is asked about with it. Every ref gets an answer;
    one the bill does not mention has been billed nothing yet."""

    def billed(self, since: Mapping[str, datetime]) -> dict[str, Billed]: ...


@runtime_checkable
class ReportsWindowedBilling(Protocol):
    """A provider whose bill is read a window at a time, each read costing time or money:
    what it billed for a pod from `since` (the pod's registration) on, as of `now`. The
    answer's `since` is where its window really starts (the bill's granularity and retention
    may move it later); its `through` where the bill's data ends (it lags by hours).
    `read_through` is where the bill the governor already booked for the pod ends (None:
    none yet); a provider whose reads cost money answers None while asking anew would not
    tell anything new."""

    def billed_since(
        self, ref: str, since: datetime, now: datetime, read_through: datetime | None
    ) -> Billed | None: ...


@dataclass(frozen=True)
class Listed:
    """One pod an account can see, as `ListsPods` reports it: what the provider's listing
    says of it besides its description. `name` is what the account calls it (None: the
    provider names no pod); `labels` its labels or tags as the provider keeps them (empty
    where the provider has none: the name is then all a rule can match); `gpu_type` and
    `gpu_count` its accelerators as the provider spells them (None: not said)."""

    ref: str
    description: PodDescription
    name: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    gpu_type: str | None = None
    gpu_count: int | None = None

    @property
    def billing(self) -> bool:
        """Its compute costs money now: running or starting (an undocumented state counts)."""
        return self.description.state.bills_compute


NAME_LABELS_MAX = 16  # the most `key=value` pairs read from one name


def labels_in_name(name: str | None) -> dict[str, str]:
    """The labels written in a pod's name, for a provider that keeps no labels of its own
    (RunPod, Vast.ai): `key=value` pairs separated by commas or spaces
    (`governor-budget=llama-lora,team=nlp`); a part without `=` is no label, and a name with
    none gives none."""
    if not name:
        return {}
    found: dict[str, str] = {}
    for part in name.replace(",", " ").split()[:NAME_LABELS_MAX]:
        key, equals, value = part.partition("=")
        if equals and key and value:
            found[key] = value
    return found


@runtime_checkable
class ListsPods(Protocol):
    """A provider that can list the pods its credentials can see."""

    def pods(self) -> Sequence[Listed]: ...


AnyProvider = StopsPreserving | TerminateOnly


class IdentityProvider(Protocol):
    """An OpenID Connect provider: signs people in (in a browser, or on a device through a
    code they confirm in one) and vouches for them again on refresh. Each call raises
    `Unauthenticated` when the provider refuses (a bad code, a revoked grant, a person it no
    longer knows), `Unavailable` when it cannot be reached or answers out of turn."""

    def start(self, redirect_uri: str) -> Authorization:
        """Where to send a browser to sign in (authorization code flow with PKCE)."""
        ...

    def finish(self, authorization: Authorization, redirect_uri: str, code: str) -> Vouched:
        """The person a browser came back for, with `code`, its ID token checked."""
        ...

    def refresh(self, refresh_token: str, subject: str) -> Vouched:
        """The same person vouched for again, their groups as they are now."""
        ...

    def start_device(self) -> DeviceCode:
        """A device sign-in (RFC 8628); Invalid when the provider offers none."""
        ...

    def poll_device(self, device_code: str) -> Vouched | None:
        """The person who confirmed the device's code; None while they have not yet."""
        ...
