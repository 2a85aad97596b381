"""The committed spend reserves the governor's own reaction: its passes, and on PostgreSQL
(replicas) one change of leader."""

from pathlib import Path

from governor.bootstrap import build_context, close_context
from governor.services.context import GovernorConfig
from governor.settings import load_settings


def test_the_reaction_is_four_passes_and_a_change_of_leader() -> None:
    assert GovernorConfig(enforce_interval_s=5.0).reaction_s == 20.0
    assert GovernorConfig(enforce_interval_s=5.0, failover_s=12.0).reaction_s == 32.0


def test_passes_that_overran_their_interval_lengthen_the_reaction() -> None:
    config = GovernorConfig(enforce_interval_s=1.0, failover_s=2.0)
    config.pace.took(0.4)  # within the interval: the interval counts
    assert config.reaction_s == 6.0
    config.pace.took(2.5)  # a busy machine: the next pass waited for this one
    assert config.reaction_s == 4 * 2.5 + 2.0
    for _ in range(19):
        config.pace.took(0.3)
    assert config.reaction_s == 4 * 2.5 + 2.0  # still among the latest 20
    config.pace.took(0.3)
    assert config.reaction_s == 6.0


def test_a_change_of_leader_is_reserved_where_replicas_can_run(tmp_path: Path) -> None:
    for url, failover in (
        (f"sqlite:///{tmp_path / 'governor.db'}", 0.0),  # one process: nobody to take over
        ("postgresql+psycopg://governor@db.invalid/governor", 10.0 + 2.0),
    ):
        ctx = build_context(load_settings(database_url=url, enforce_interval_s=5.0))
        try:
            assert ctx.config.failover_s == failover, url
        finally:
            close_context(ctx)
