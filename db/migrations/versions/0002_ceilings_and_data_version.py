"""Measured ceilings move into the database; data_version for change polling; trial extras.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create xe2t_ceilings and xe2t_meta (data_version starts at 1); add xe2t_trials.extra."""
    op.create_table(
        "xe2t_ceilings",
        sa.Column("device_id", sa.Integer(), nullable=False),
        sa.Column("flops", sa.JSON(), nullable=False),
        sa.Column("bandwidth", sa.Float(), nullable=False),
        sa.Column("llc_bytes", sa.BigInteger(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("measured_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["device_id"], ["xe2t_devices.id"],
            name=op.f("fk_xe2t_ceilings_device_id_xe2t_devices"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("device_id", name=op.f("pk_xe2t_ceilings")),
    )
    meta = op.create_table(
        "xe2t_meta",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_xe2t_meta")),
    )
    op.bulk_insert(meta, [{"key": "data_version", "value": 1}])
    with op.batch_alter_table("xe2t_trials") as batch:
        batch.add_column(sa.Column("extra", sa.JSON(), nullable=False,
                                   server_default=sa.text("'{}'")))


def downgrade() -> None:
    """Drop xe2t_trials.extra, xe2t_meta and xe2t_ceilings."""
    with op.batch_alter_table("xe2t_trials") as batch:
        batch.drop_column("extra")
    op.drop_table("xe2t_meta")
    op.drop_table("xe2t_ceilings")
