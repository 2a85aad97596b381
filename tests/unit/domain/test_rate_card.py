"""The rate card: the most specific key wins, a spot launch without a spot rate is priced
on demand, a launch naming no provider at the dearest provider's rate; bad keys are named."""

from __future__ import annotations

from decimal import Decimal

import pytest

from governor.domain.rate_card import RateCard

CARD = RateCard.of(
    {
        "aws:H100": "4.00",
        "aws:H100:spot": 2,
        "aws:H100@us-west-2": "4.50",
        "aws:H100:spot@us-west-2": "2.50",
        "gcp:H100": "5.00",
    }
)


@pytest.mark.parametrize(
    ("provider", "spot", "region", "usd", "key"),
    [
        ("aws", False, None, "4.00", "aws:h100"),
        ("aws", True, None, "2.00", "aws:h100:spot"),
        ("AWS", False, "us-west-2", "4.50", "aws:h100@us-west-2"),
        ("aws", True, "US-West-2", "2.50", "aws:h100:spot@us-west-2"),
        ("aws", True, "eu-west-1", "2.00", "aws:h100:spot"),  # no such region: spot wins
        ("gcp", True, None, "5.00", "gcp:h100"),  # no spot rate: on demand, the dearer
        (None, False, None, "5.00", "gcp:h100"),  # any provider: the dearest
    ],
)
def test_the_most_specific_key_wins(
    provider: str | None, spot: bool, region: str | None, usd: str, key: str
) -> None:
    rate = CARD.rate(provider, "h100", spot=spot, region=region)
    assert rate is not None
    assert (rate.usd_per_gpu_hour, rate.key) == (Decimal(usd), key)


def test_an_unknown_accelerator_or_provider_has_no_rate() -> None:
    assert CARD.rate("aws", "B200", spot=False, region=None) is None
    assert CARD.rate("lambda", "H100", spot=False, region=None) is None
    assert CARD.rate(None, "B200", spot=True, region=None) is None


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ({"H100": 1}, "'H100': want provider:accelerator"),
        ({"aws:H100:reserved": 1}, "want provider:accelerator"),
        ({"aws:H100@": 1}, "a region after '@'"),
        ({"aws:": 1}, "both a provider and an accelerator"),
        ({"aws:H100": "-1"}, "'aws:H100': the rate must not be negative"),
        ({"aws:H100": 0}, "must be greater than zero"),
    ],
)
def test_a_bad_key_or_rate_is_named(raw: dict[str, object], said: str) -> None:
    with pytest.raises(ValueError, match=said):
        RateCard.of(raw)
