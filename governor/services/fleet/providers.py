"""`governor providers check`: can each configured provider be reached with its credentials,
and which pods does it see (with their rates), next to the pods registered here."""

from __future__ import annotations

from dataclasses import dataclass, field

from governor.db import repository as repo
from governor.db.engine import unit_of_work
from governor.domain.ports import (
    AnyProvider,
    Listed,
    ListsPods,
    NamesCredential,
    ProviderError,
    StopsPreserving,
    TerminateOnly,
)
from governor.services.context import ServiceContext

PROBE_REF = "gpu-governor-credentials-probe"  # a pod no account has: not found means it answered


@dataclass(frozen=True)
class ProviderCheck:
    name: str
    ok: bool
    said: str  # what happened, in a sentence
    capability: str  # "stops keeping the workspace" or "terminate only"
    pods: list[Listed] = field(default_factory=list)
    registered: dict[str, str] = field(default_factory=dict)  # provider ref -> governor pod id

    @property
    def unseen(self) -> dict[str, str]:
        """Pods governed here that the provider did not list: another account, or gone."""
        listed = {pod.ref for pod in self.pods}
        return {ref: pod_id for ref, pod_id in self.registered.items() if ref not in listed}


def check_all(ctx: ServiceContext, registered: dict[str, dict[str, str]]) -> list[ProviderCheck]:
    """One check per configured provider; `registered` is {provider: {ref: pod id}}."""
    return [
        _check(name, provider, registered.get(name, {}))
        for name, provider in sorted(ctx.providers.items())
    ]


def registered_pods(ctx: ServiceContext) -> dict[str, dict[str, str]]:
    with unit_of_work(ctx.sessions) as session:
        rows = repo.pods_not_gone(session)
        found: dict[str, dict[str, str]] = {}
        for row in rows:
            found.setdefault(row.provider, {})[row.provider_ref] = row.id
        return found


def _check(name: str, provider: AnyProvider, registered: dict[str, str]) -> ProviderCheck:
    capability = (
        "stops keeping the workspace"
        + (
            " (terminates the pods no stop works for)"
            if isinstance(provider, TerminateOnly)
            else ""
        )
        if isinstance(provider, StopsPreserving)
        else "terminate only"
    )
    try:
        if isinstance(provider, ListsPods):
            pods = list(provider.pods())
            said = f"credentials accepted; {len(pods)} pod(s) visible"
            if isinstance(provider, NamesCredential):
                said = f"{said}; credential: {provider.credential}"
        else:
            pods = _registered_only(provider, registered)
            said = "answered; it cannot list pods, so those registered here are shown"
    except ProviderError as exc:
        return ProviderCheck(name, False, str(exc), capability, registered=registered)
    return ProviderCheck(name, True, said, capability, pods, registered)


def _registered_only(provider: AnyProvider, registered: dict[str, str]) -> list[Listed]:
    """Describe each registered pod; with none, a probe whose 'not found' proves the key."""
    if not registered:
        try:
            provider.describe(PROBE_REF)
        except ProviderError as exc:
            if exc.retryable or exc.status in (401, 403):
                raise
        return []
    return [Listed(ref, provider.describe(ref)) for ref in registered]
