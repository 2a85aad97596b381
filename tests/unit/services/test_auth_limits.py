"""Token lookups limited per source: failures counted per address (per /64 for IPv6), a source
past its failure rate looked up at its pace within a bounded wait, a cap on the lookups under
way; the client address comes from X-Forwarded-For only through a trusted proxy."""

from __future__ import annotations

import asyncio

import pytest

from governor.domain.errors import Unavailable
from governor.services.security.auth_limits import (
    AuthLimits,
    TooManyAttempts,
    client_address,
    source_of,
    trusted_networks,
)


class Ticks:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Naps:
    """An injected sleep: records each wait and lets the clock stand still."""

    def __init__(self) -> None:
        self.taken: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.taken.append(seconds)


def failures(limits: AuthLimits, address: str, times: int) -> list[bool]:
    """Fail `times` from `address`: for each, whether it was refused as too many."""
    refused = []
    for _ in range(times):
        try:
            limits.failed(address)
            refused.append(False)
        except TooManyAttempts:
            refused.append(True)
    return refused


async def looked_up(limits: AuthLimits, address: str) -> None:
    async with limits.lookup(address):
        pass


def test_failures_are_counted_per_source_until_the_window_ends() -> None:
    ticks = Ticks()
    limits = AuthLimits(per_source=3, window_s=60, monotonic=ticks)
    assert failures(limits, "10.0.0.9", 3) == [False] * 3
    with pytest.raises(TooManyAttempts) as refused:
        limits.failed("10.0.0.9")
    assert refused.value.retry_after_s == pytest.approx(20.0)  # 1000 s is 40 s into its window
    assert "from this address" in refused.value.message
    assert failures(limits, "10.0.0.10", 3) == [False] * 3  # another address counts its own
    ticks.now += 20  # a new window
    assert failures(limits, "10.0.0.9", 4) == [False] * 3 + [True]


def test_ipv6_counts_by_its_64_and_a_mapped_ipv4_as_itself() -> None:
    assert source_of("2001:db8:1:2:3::4") == source_of("2001:db8:1:2:ffff::1")
    assert source_of("2001:db8:1:2:3::4") == "2001:db8:1:2::/64"
    assert source_of("2001:db8:1:3::1") != source_of("2001:db8:1:2::1")
    assert source_of("::ffff:192.0.2.7") == source_of("192.0.2.7") == "192.0.2.7"
    assert source_of("192.0.2.7") != source_of("192.0.2.8")
    assert source_of("unknown") == "unknown"

    limits = AuthLimits(per_source=2, monotonic=Ticks())
    assert failures(limits, "2001:db8:1:2::a", 2) == [False, False]
    assert failures(limits, "2001:db8:1:2::b", 1) == [True]  # the same /64
    assert failures(limits, "2001:db8:1:3::a", 1) == [False]  # the next /64


def test_a_full_table_lets_its_oldest_counts_go_never_an_attackers_own() -> None:
    limits = AuthLimits(per_source=2, max_keys=3, monotonic=Ticks())
    assert failures(limits, "10.0.0.66", 3) == [False, False, True]
    for filler in range(1, 50):  # ever new addresses fill the table, while 66 keeps failing
        failures(limits, f"10.0.1.{filler}", 1)
        assert failures(limits, "10.0.0.66", 1) == [True], f"reset after {filler} others"
    # the others' counts were let go oldest first: the first filler counts afresh
    assert failures(limits, "10.0.1.1", 2) == [False, False]


def test_a_source_within_its_rate_is_looked_up_at_once() -> None:
    naps = Naps()
    limits = AuthLimits(per_source=3, monotonic=Ticks(), sleep=naps)
    failures(limits, "10.0.0.5", 2)

    async def many() -> None:
        for _ in range(20):
            await looked_up(limits, "10.0.0.5")

    asyncio.run(many())
    assert naps.taken == []


def test_a_source_past_its_rate_takes_turns_and_waits_within_the_bound() -> None:
    naps = Naps()
    limits = AuthLimits(per_source=2, pace_s=1.0, max_wait_s=3.0, monotonic=Ticks(), sleep=naps)
    failures(limits, "10.0.0.7", 3)

    async def flood() -> TooManyAttempts:
        for _ in range(4):  # turns now, in 1, 2 and 3 s: all within the bound
            await looked_up(limits, "10.0.0.7")
        with pytest.raises(TooManyAttempts) as refused:
            await looked_up(limits, "10.0.0.7")  # in 4 s: past it, refused unasked
        await looked_up(limits, "10.0.0.8")  # another source is not held back
        return refused.value

    refused = asyncio.run(flood())
    assert naps.taken == [1.0, 2.0, 3.0]
    assert refused.retry_after_s == pytest.approx(1.0)


def test_a_source_waits_its_turn_in_real_time_without_holding_up_another() -> None:
    limits = AuthLimits(per_source=1, window_s=1e6, pace_s=0.2, max_wait_s=5.0)
    failures(limits, "10.0.0.7", 1)
    order: list[str] = []

    async def one(address: str) -> None:
        await looked_up(limits, address)
        order.append(address)

    async def both() -> None:
        await one("10.0.0.7")  # its turn is now; the next one's in 0.2 s
        await asyncio.gather(one("10.0.0.7"), one("10.0.0.8"))

    asyncio.run(both())
    assert order == ["10.0.0.7", "10.0.0.8", "10.0.0.7"]


def test_lookups_under_way_are_capped_and_a_wait_for_one_is_bounded() -> None:
    limits = AuthLimits(max_lookups=2, max_wait_s=0.2)

    async def capped() -> None:
        release, entered = asyncio.Event(), asyncio.Event()

        async def held() -> None:
            async with limits.lookup("10.0.0.1"):
                await release.wait()

        async def third() -> None:
            async with limits.lookup("10.0.0.3"):
                entered.set()

        holders = [asyncio.create_task(held()) for _ in range(2)]
        for _ in range(3):
            await asyncio.sleep(0)  # both holders take their lookups
        with pytest.raises(Unavailable, match="looked up at once"):
            await looked_up(limits, "10.0.0.2")  # none free within 0.2 s
        waiting = asyncio.create_task(third())
        await asyncio.sleep(0)
        assert not entered.is_set()
        release.set()
        await asyncio.wait_for(entered.wait(), 30)
        await asyncio.gather(waiting, *holders)

    asyncio.run(capped())


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


def test_sign_ins_started_are_counted_per_source_apart_from_failures() -> None:
    ticks = Ticks()
    limits = AuthLimits(per_source=1, starts_per_source=2, window_s=60, monotonic=ticks)
    limits.started("10.0.0.9")
    limits.started("10.0.0.9")
    with pytest.raises(TooManyAttempts, match="too many sign-ins started") as refused:
        limits.started("10.0.0.9")
    assert refused.value.retry_after_s == 20  # the window of [960, 1020) ends in 20 s
    limits.started("10.0.0.10")  # another source counts its own
    assert failures(limits, "10.0.0.9", 1) == [False]  # starts are not failures
    ticks.now += 20
    limits.started("10.0.0.9")  # a new window
