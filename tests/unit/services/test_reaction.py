"""The committed spend reserves the governor's own reaction: its passes, and on PostgreSQL
(replicas) one change of leader."""

from pathlib import Path

from governor.bootstrap import build_context, close_context
from governor.services.context import GovernorConfig
from governor.settings import load_settings


def test_the_reaction_is_four_passes_and_a_change_of_leader() -> None:
    assert GovernorConfig(enforce_interval_s=5.0).reaction_s == 20.0
    assert GovernorConfig(enforce_interval_s=5.0, failover_s=12.0).reaction_s == 32.0


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
