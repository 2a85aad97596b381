"""The rate card: USD per GPU-hour by provider and accelerator, optionally for spot capacity and
in one region, for pricing a launch before any pod exists.

A key is `provider:accelerator`, `provider:accelerator:spot`, either with `@region` after it
(`aws:H100:spot@us-east-1`); the most specific key that matches wins: spot and region both,
then spot, then region, then neither. A spot launch without a spot rate is priced at the
on-demand one (the dearer, so the reservation is never short). Providers and accelerators are
compared without regard to case.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from governor.domain.money import MoneyError, parse_usd

SPOT = "spot"


@dataclass(frozen=True)
class Key:
    provider: str
    accelerator: str
    spot: bool = False
    region: str | None = None

    @classmethod
    def parse(cls, text: str) -> Key:
        """`provider:accelerator[:spot][@region]`; ValueError, saying why, otherwise."""
        base, at, region = text.partition("@")
        parts = base.split(":")
        if at and not region.strip():
            raise ValueError(f"{text!r}: a region after '@' (or no '@')")
        if len(parts) == 3 and parts[2].strip().lower() == SPOT:
            parts = parts[:2]
            spot = True
        elif len(parts) == 2:
            spot = False
        else:
            raise ValueError(
                f"{text!r}: want provider:accelerator, provider:accelerator:spot, "
                "optionally followed by @region"
            )
        provider, accelerator = (p.strip().lower() for p in parts)
        if not provider or not accelerator:
            raise ValueError(f"{text!r}: both a provider and an accelerator")
        return cls(provider, accelerator, spot, region.strip().lower() if at else None)

    def __str__(self) -> str:
        spot = f":{SPOT}" if self.spot else ""
        region = f"@{self.region}" if self.region else ""
        return f"{self.provider}:{self.accelerator}{spot}{region}"


@dataclass(frozen=True)
class Rate:
    usd_per_gpu_hour: Decimal
    key: str  # the key that priced it, as written
    source: str  # "rate card", or where else it came from


@dataclass(frozen=True)
class RateCard:
    rates: Mapping[Key, Decimal] = field(default_factory=dict)

    @classmethod
    def of(cls, raw: Mapping[str, object]) -> RateCard:
        """From the setting's JSON object; ValueError naming the bad key or rate."""
        rates: dict[Key, Decimal] = {}
        for text, value in raw.items():
            key = Key.parse(text)
            try:
                rates[key] = parse_usd(value, positive=True)
            except MoneyError as exc:
                raise ValueError(f"{text!r}: the rate {exc}") from None
        return cls(rates)

    def rate(
        self, provider: str | None, accelerator: str, *, spot: bool, region: str | None
    ) -> Rate | None:
        """The per-GPU-hour rate of `accelerator` at `provider` (None: any provider, and the
        dearest of theirs answers), the most specific key first; None when none matches."""
        accelerator = accelerator.lower()
        region = region.lower() if region else None
        providers = (
            [provider.lower()]
            if provider
            else sorted({k.provider for k in self.rates if k.accelerator == accelerator})
        )
        found = [r for p in providers if (r := self._one(p, accelerator, spot, region))]
        return max(found, key=lambda r: r.usd_per_gpu_hour, default=None)

    def _one(self, provider: str, accelerator: str, spot: bool, region: str | None) -> Rate | None:
        for key in _most_specific_first(provider, accelerator, spot, region):
            if (usd := self.rates.get(key)) is not None:
                return Rate(usd, str(key), "rate card")
        return None


def _most_specific_first(
    provider: str, accelerator: str, spot: bool, region: str | None
) -> Iterable[Key]:
    for with_spot in (True, False) if spot else (False,):
        if region:
            yield Key(provider, accelerator, with_spot, region)
        yield Key(provider, accelerator, with_spot)
