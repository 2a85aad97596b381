"""team ceilings: a team's ceiling per period, its extensions, and its hold

A team may declare a ceiling per period (a calendar month, or every N days, in its time zone);
an approved extension raises it for the period it was approved in; a team that reached it is
held until its next period starts.

Revision ID: f9c3e5b7d1a5
Revises: f9c3e5b7d1a4
Create Date: 2026-12-05 18:45:00.000000
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import sqlalchemy as sa
from alembic import op

revision: str = "f9c3e5b7d1a5"
down_revision: str | None = "f9c3e5b7d1a4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


@contextmanager
def _teams_rebuilt() -> Iterator[None]:
    """SQLite rebuilds `teams` to drop its columns: a copy replaces it, which `budgets` (that
    refers to it) would refuse while foreign keys are enforced, and SQLite turns their
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
            raise RuntimeError(f"references broken by rebuilding teams: {broken[:5]}")
        driver.execute("COMMIT")
    except BaseException:
        driver.execute("ROLLBACK")
        raise
    finally:
        driver.execute("PRAGMA foreign_keys=ON")
        driver.execute("BEGIN IMMEDIATE")


def upgrade() -> None:
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.add_column(sa.Column("ceiling_usd", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("period", sa.String(length=24), nullable=True))
        batch_op.add_column(sa.Column("period_days", sa.Integer(), nullable=True))
        batch_op.add_column(
            sa.Column("ceiling_declared_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(sa.Column("held_from", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "team_extensions",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("period_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("amount_usd", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("requested_by", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=24), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_by", sa.Text(), nullable=True),
        sa.Column("decision_note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_team_extensions_team_id_teams")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_team_extensions")),
    )
    with op.batch_alter_table("team_extensions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_team_extensions_team_id"), ["team_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("team_extensions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_team_extensions_team_id"))
    op.drop_table("team_extensions")
    with _teams_rebuilt(), op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.drop_column("held_from")
        batch_op.drop_column("ceiling_declared_at")
        batch_op.drop_column("period_days")
        batch_op.drop_column("period")
        batch_op.drop_column("ceiling_usd")
