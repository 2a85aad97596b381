"""teams: an organisation holds teams, a team holds budgets

Every budget belongs to a team; the budgets declared before teams belong to the default team,
which this migration makes.

Revision ID: f9c3e5b7d1a4
Revises: e6a2c8f4b1d7
Create Date: 2026-12-05 18:30:00.000000
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "f9c3e5b7d1a4"
down_revision: str | None = "e6a2c8f4b1d7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEFAULT_TEAM_ID = "team_default"


@contextmanager
def _budgets_rebuilt() -> Iterator[None]:
    """SQLite rebuilds `budgets` to give it a foreign key: a copy replaces it, which the tables
    that refer to it would refuse while foreign keys are enforced, and SQLite turns their
    enforcement off only between transactions. So, on SQLite, what came before is committed,
    the rebuild runs in a transaction of its own with enforcement off, every reference is
    checked, and enforcement comes back on for the rest."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        yield
        return
    driver = bind.connection.driver_connection
    driver.execute("COMMIT")
    driver.execute("PRAGMA foreign_keys=OFF")
    driver.execute("BEGIN IMMEDIATE")
    try:
        yield
        broken = driver.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise RuntimeError(f"references broken by rebuilding budgets: {broken[:5]}")
        driver.execute("COMMIT")
    except BaseException:
        driver.execute("ROLLBACK")
        raise
    finally:
        driver.execute("PRAGMA foreign_keys=ON")
        driver.execute("BEGIN IMMEDIATE")


def upgrade() -> None:
    teams = op.create_table(
        "teams",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("time_zone", sa.String(length=64), server_default="UTC", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_teams")),
        sa.UniqueConstraint("name", name=op.f("uq_teams_name")),
    )
    # the default team dates from before any budget, so it lists first; SQLite keeps a naive
    # UTC time (as the tables' UTCDateTime writes it)
    made = datetime(2000, 1, 1, tzinfo=UTC)
    if op.get_bind().dialect.name == "sqlite":
        made = made.replace(tzinfo=None)
    op.bulk_insert(
        teams, [{"id": DEFAULT_TEAM_ID, "name": "default", "time_zone": "UTC", "created_at": made}]
    )
    with _budgets_rebuilt(), op.batch_alter_table("budgets", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "team_id", sa.String(length=32), server_default=DEFAULT_TEAM_ID, nullable=False
            )
        )
        batch_op.create_index(batch_op.f("ix_budgets_team_id"), ["team_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_budgets_team_id_teams"), "teams", ["team_id"], ["id"]
        )


def downgrade() -> None:
    with _budgets_rebuilt(), op.batch_alter_table("budgets", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_budgets_team_id_teams"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_budgets_team_id"))
        batch_op.drop_column("team_id")
    op.drop_table("teams")
