"""initial schema

Revision ID: 3bb848175009
Revises:
Create Date: 2026-11-29 09:10:15.192044
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "3bb848175009"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "budgets",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("ceiling_usd", sa.BigInteger(), nullable=False),
        sa.Column("reserve_usd", sa.BigInteger(), nullable=False),
        sa.Column("storage_tail_hours", sa.Double(), nullable=False),
        sa.Column("alert_thresholds", sa.JSON(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column(
            "state",
            sa.Enum(
                "open",
                "stopping",
                "exhausted",
                "closed",
                name="budgetstate",
                native_enum=False,
                length=24,
            ),
            nullable=False,
        ),
        sa.Column("alerted_pct", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_budgets")),
    )
    op.create_table(
        "events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "severity",
            sa.Enum("info", "warning", "critical", name="severity", native_enum=False, length=24),
            nullable=False,
        ),
        sa.Column(
            "category",
            sa.Enum(
                "budget",
                "telemetry",
                "provider",
                "harness",
                "model",
                "operator",
                "governor",
                name="category",
                native_enum=False,
                length=24,
            ),
            nullable=False,
        ),
        sa.Column("subject", sa.String(length=100), nullable=False),
        sa.Column("budget_id", sa.String(length=32), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["budget_id"], ["budgets.id"], name=op.f("fk_events_budget_id_budgets")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_events_at"), ["at"], unique=False)
        batch_op.create_index(batch_op.f("ix_events_budget_id"), ["budget_id"], unique=False)

    op.create_table(
        "pods",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("budget_id", sa.String(length=32), nullable=False),
        sa.Column("provider", sa.String(length=40), nullable=False),
        sa.Column("provider_ref", sa.String(length=200), nullable=False),
        sa.Column("gpu_type", sa.String(length=100), nullable=True),
        sa.Column("gpu_count", sa.Integer(), nullable=True),
        sa.Column("hourly_rate_usd", sa.BigInteger(), nullable=False),
        sa.Column(
            "rate_source",
            sa.Enum("provider", "declared", name="ratesource", native_enum=False, length=24),
            nullable=False,
        ),
        sa.Column("storage_gb", sa.Double(), nullable=False),
        sa.Column("storage_usd_per_gb_month", sa.BigInteger(), nullable=False),
        sa.Column("stopped_storage_usd_per_gb_month", sa.BigInteger(), nullable=False),
        sa.Column("stop_latency_s", sa.Double(), nullable=False),
        sa.Column(
            "state",
            sa.Enum(
                "running",
                "stopping",
                "stopped",
                "gone",
                name="podstate",
                native_enum=False,
                length=24,
            ),
            nullable=False,
        ),
        sa.Column("accrued_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["budget_id"], ["budgets.id"], name=op.f("fk_pods_budget_id_budgets")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pods")),
    )
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_pods_budget_id"), ["budget_id"], unique=False)
        batch_op.create_index("uq_pods_provider_ref", ["provider", "provider_ref"], unique=True)

    op.create_table(
        "ledger_entries",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("budget_id", sa.String(length=32), nullable=False),
        sa.Column("pod_id", sa.String(length=32), nullable=False),
        sa.Column(
            "kind",
            sa.Enum(
                "accrual", "true_up", "adjustment", name="entrykind", native_enum=False, length=24
            ),
            nullable=False,
        ),
        sa.Column(
            "charge",
            sa.Enum("compute", "storage", name="chargekind", native_enum=False, length=24),
            nullable=False,
        ),
        sa.Column("amount_usd", sa.BigInteger(), nullable=False),
        sa.Column("period_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("period_end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["budget_id"], ["budgets.id"], name=op.f("fk_ledger_entries_budget_id_budgets")
        ),
        sa.ForeignKeyConstraint(
            ["pod_id"], ["pods.id"], name=op.f("fk_ledger_entries_pod_id_pods")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger_entries")),
    )
    with op.batch_alter_table("ledger_entries", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_ledger_entries_budget_id"), ["budget_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_ledger_entries_pod_id"), ["pod_id"], unique=False)

    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("budget_id", sa.String(length=32), nullable=False),
        sa.Column("pod_id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("total_steps", sa.Integer(), nullable=True),
        sa.Column("heartbeat_timeout_s", sa.Double(), nullable=False),
        sa.Column("checkpoint_grace_s", sa.Double(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column(
            "phase",
            sa.Enum(
                "loading",
                "compiling",
                "canary",
                "training",
                "checkpointing",
                "evaluation",
                "export",
                name="phase",
                native_enum=False,
                length=24,
            ),
            nullable=True,
        ),
        sa.Column(
            "status",
            sa.Enum(
                "running",
                "checkpointing",
                "stopping",
                "stopped",
                "finished",
                "failed",
                name="runstatus",
                native_enum=False,
                length=24,
            ),
            nullable=False,
        ),
        sa.Column("last_heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("checkpoint_step", sa.Integer(), nullable=True),
        sa.Column("checkpoint_path", sa.Text(), nullable=True),
        sa.Column("checkpoint_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "directive",
            sa.Enum("continue", "checkpoint", "stop", name="action", native_enum=False, length=24),
            nullable=False,
        ),
        sa.Column(
            "directive_reason",
            sa.Enum(
                "ceiling",
                "heartbeat-lost",
                "idle-hang",
                "stalled",
                "finished",
                "manual",
                "pre-stop",
                "forecast",
                "threshold",
                name="reason",
                native_enum=False,
                length=24,
            ),
            nullable=True,
        ),
        sa.Column("directive_message", sa.Text(), nullable=True),
        sa.Column("checkpoint_asked", sa.Boolean(), nullable=False),
        sa.Column("forecast_warned", sa.Boolean(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=True),
        sa.Column("pace_step", sa.Integer(), nullable=True),
        sa.Column("pace_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["budget_id"], ["budgets.id"], name=op.f("fk_runs_budget_id_budgets")
        ),
        sa.ForeignKeyConstraint(["pod_id"], ["pods.id"], name=op.f("fk_runs_pod_id_pods")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_runs_budget_id"), ["budget_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_pod_id"), ["pod_id"], unique=False)

    op.create_table(
        "stop_orders",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("budget_id", sa.String(length=32), nullable=False),
        sa.Column("pod_id", sa.String(length=32), nullable=False),
        sa.Column(
            "reason",
            sa.Enum(
                "ceiling",
                "heartbeat-lost",
                "idle-hang",
                "stalled",
                "finished",
                "manual",
                "pre-stop",
                "forecast",
                "threshold",
                name="reason",
                native_enum=False,
                length=24,
            ),
            nullable=False,
        ),
        sa.Column(
            "state",
            sa.Enum(
                "requested",
                "job_notified",
                "job_acked",
                "deadline_passed",
                "provider_stop_sent",
                "stopped",
                "failed",
                name="stopstate",
                native_enum=False,
                length=24,
            ),
            nullable=False,
        ),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("notified_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("acked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ack_checkpoint", sa.JSON(), nullable=True),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("confirmed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["budget_id"], ["budgets.id"], name=op.f("fk_stop_orders_budget_id_budgets")
        ),
        sa.ForeignKeyConstraint(["pod_id"], ["pods.id"], name=op.f("fk_stop_orders_pod_id_pods")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stop_orders")),
    )
    with op.batch_alter_table("stop_orders", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_stop_orders_budget_id"), ["budget_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_stop_orders_pod_id"), ["pod_id"], unique=False)
        batch_op.create_index(
            "uq_stop_orders_active_pod",
            ["pod_id"],
            unique=True,
            sqlite_where=sa.text("state NOT IN ('stopped', 'failed')"),
            postgresql_where=sa.text("state NOT IN ('stopped', 'failed')"),
        )

    op.create_table(
        "extensions",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("budget_id", sa.String(length=32), nullable=False),
        sa.Column("amount_usd", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column(
            "requested_by",
            sa.Enum("operator", "job", name="requester", native_enum=False, length=24),
            nullable=False,
        ),
        sa.Column("run_id", sa.String(length=32), nullable=True),
        sa.Column(
            "state",
            sa.Enum(
                "pending",
                "approved",
                "denied",
                "expired",
                name="extensionstate",
                native_enum=False,
                length=24,
            ),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decision_note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["budget_id"], ["budgets.id"], name=op.f("fk_extensions_budget_id_budgets")
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_extensions_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_extensions")),
    )
    with op.batch_alter_table("extensions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_extensions_budget_id"), ["budget_id"], unique=False)

    op.create_table(
        "tokens",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column(
            "role",
            sa.Enum("operator", "viewer", "job", name="role", native_enum=False, length=24),
            nullable=False,
        ),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=True),
        sa.Column("run_id", sa.String(length=32), nullable=True),
        sa.Column("budget_id", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["budget_id"], ["budgets.id"], name=op.f("fk_tokens_budget_id_budgets")
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_tokens_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_tokens_token_hash")),
    )


def downgrade() -> None:
    op.drop_table("tokens")
    with op.batch_alter_table("extensions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_extensions_budget_id"))

    op.drop_table("extensions")
    with op.batch_alter_table("stop_orders", schema=None) as batch_op:
        batch_op.drop_index(
            "uq_stop_orders_active_pod",
            sqlite_where=sa.text("state NOT IN ('stopped', 'failed')"),
            postgresql_where=sa.text("state NOT IN ('stopped', 'failed')"),
        )
        batch_op.drop_index(batch_op.f("ix_stop_orders_pod_id"))
        batch_op.drop_index(batch_op.f("ix_stop_orders_budget_id"))

    op.drop_table("stop_orders")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_pod_id"))
        batch_op.drop_index(batch_op.f("ix_runs_budget_id"))

    op.drop_table("runs")
    with op.batch_alter_table("ledger_entries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_ledger_entries_pod_id"))
        batch_op.drop_index(batch_op.f("ix_ledger_entries_budget_id"))

    op.drop_table("ledger_entries")
    with op.batch_alter_table("pods", schema=None) as batch_op:
        batch_op.drop_index("uq_pods_provider_ref")
        batch_op.drop_index(batch_op.f("ix_pods_budget_id"))

    op.drop_table("pods")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_events_budget_id"))
        batch_op.drop_index(batch_op.f("ix_events_at"))

    op.drop_table("events")
    op.drop_table("budgets")
