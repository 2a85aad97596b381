"""What stopping loses, where an operator accepted it in writing at registration: the words
the governor tells it in wherever a stopped budget is described."""

from __future__ import annotations

from collections.abc import Iterable


def lost_at_stop(pods: Iterable[tuple[str, str]]) -> str | None:
    """Which pods lose their workspace when stopped, as acknowledged at registration, from
    (name, what its provider said the stop loses) pairs, in one clause; None: none does."""
    told = [f"{name}'s stop loses its workspace ({lost})" for name, lost in pods]
    return "as acknowledged at registration, " + "; ".join(told) if told else None
