"""launches: a gate's accepted launches, their reservations and claim secrets; pods.launch_id

A launch a SkyPilot or dstack gate accepted reserves its priced maximum against its budget
until its pod registers, it is withdrawn or it expires; its run's one-time claim secret is kept
hashed. A pod registered with the launch id is tied to it.

Revision ID: f7a1c3e5b9d2
Revises: f8b2d4a6c0e3
Create Date: 2026-12-05 19:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "f7a1c3e5b9d2"
down_revision: str | None = "f8b2d4a6c0e3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "launches",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("budget_id", sa.String(length=32), nullable=False),
        sa.Column("tool", sa.String(length=40), nullable=False),
        sa.Column("request_key", sa.String(length=64), nullable=True),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("user", sa.String(length=200), nullable=True),
        sa.Column("project", sa.String(length=200), nullable=True),
        sa.Column("plan_id", sa.String(length=32), nullable=True),
        sa.Column("price_usd", sa.BigInteger(), nullable=False),
        sa.Column("reserved_usd", sa.BigInteger(), nullable=False),
        sa.Column("figures", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("release_reason", sa.String(length=40), nullable=True),
        sa.Column("claim_hash", sa.String(length=64), nullable=False),
        sa.Column("claim_expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("run_id", sa.String(length=32), nullable=True),
        sa.ForeignKeyConstraint(
            ["budget_id"], ["budgets.id"], name=op.f("fk_launches_budget_id_budgets")
        ),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["plan_checks.id"], name=op.f("fk_launches_plan_id_plan_checks")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_launches")),
        sa.UniqueConstraint("claim_hash", name=op.f("uq_launches_claim_hash")),
    )
    with op.batch_alter_table("launches", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_launches_budget_id"), ["budget_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_launches_request_key"), ["request_key"], unique=False)
        batch_op.create_index(
            "ix_launches_released_at_budget_id", ["released_at", "budget_id"], unique=False
        )
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.add_column(sa.Column("launch_id", sa.String(length=32), nullable=True))
        batch_op.create_index(batch_op.f("ix_pods_launch_id"), ["launch_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_pods_launch_id_launches"), "launches", ["launch_id"], ["id"]
        )


def downgrade() -> None:
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_pods_launch_id_launches"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_pods_launch_id"))
        batch_op.drop_column("launch_id")
    with op.batch_alter_table("launches", schema=None) as batch_op:
        batch_op.drop_index("ix_launches_released_at_budget_id")
        batch_op.drop_index(batch_op.f("ix_launches_request_key"))
        batch_op.drop_index(batch_op.f("ix_launches_budget_id"))
    op.drop_table("launches")
