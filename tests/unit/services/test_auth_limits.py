"""Failed authentications: limited per address and per token prefix, in fixed windows; the
client address comes from X-Forwarded-For only through a trusted proxy."""

from __future__ import annotations

import pytest

from governor.services.security.auth_limits import (
    FailureLimiter,
    TooManyAttempts,
    client_address,
    prefix_of,
    trusted_networks,
)


class Ticks:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_address_past_its_limit_waits_for_the_window_to_end() -> None:
    ticks = Ticks()
    limiter = FailureLimiter(per_address=3, per_prefix=100, window_s=60, monotonic=ticks)
    for _ in range(3):
        limiter.check("10.0.0.9", "gov_op_wrong")
        limiter.failed("10.0.0.9", "gov_op_wrong")
    with pytest.raises(TooManyAttempts) as refused:
        limiter.check("10.0.0.9", "gov_op_anything")
    assert refused.value.retry_after_s == pytest.approx(20.0)  # 1000 s is 40 s into its window
    limiter.check("10.0.0.10", "gov_op_wrong")  # another address is not held back
    ticks.now += 20
    limiter.check("10.0.0.9", "gov_op_wrong")  # a new window


def test_a_token_prefix_past_its_limit_is_held_back_from_every_address() -> None:
    limiter = FailureLimiter(per_address=100, per_prefix=5, monotonic=Ticks())
    for n in range(5):
        limiter.failed(f"10.0.1.{n}", "gov_op_guess")
    with pytest.raises(TooManyAttempts, match="prefix"):
        limiter.check("10.0.2.1", "gov_op_other")
    limiter.check("10.0.2.1", "gov_view_other")


def test_prefixes() -> None:
    assert prefix_of("gov_op_abc_def") == "gov_op"
    assert prefix_of("gov_job_x") == "gov_job"
    assert prefix_of("Bearer nonsense") == prefix_of(None) == prefix_of("gov_") == "other"


def test_forwarded_for_counts_only_through_a_trusted_proxy() -> None:
    proxies = trusted_networks(["10.1.0.0/16", " 127.0.0.1 ", ""])
    chain = "203.0.113.7, 10.1.2.3"
    assert client_address("127.0.0.1", chain, proxies) == "203.0.113.7"
    assert client_address("198.51.100.4", chain, proxies) == "198.51.100.4"  # not a proxy
    assert client_address("127.0.0.1", None, proxies) == "127.0.0.1"
    assert client_address("127.0.0.1", "10.1.9.9", proxies) == "127.0.0.1"  # proxies only
    assert client_address(None, chain, ()) == "unknown"
    with pytest.raises(ValueError):
        trusted_networks(["not-an-address"])
