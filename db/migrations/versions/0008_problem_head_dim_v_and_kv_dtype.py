"""Latent attention and FP8 K/V: the V head dim and the K/V storage dtype of each problem.

``xe2t_problems.head_dim_v`` (Dv) is the head dim of V and O; every problem stored before this
revision had Dv = D, so existing rows get ``head_dim``. ``xe2t_problems.kv_dtype`` names the FP8
format K and V are stored in (e4m3, e5m2), NULL when they are stored in the problem's dtype, as
every existing row's are. Problem keys are unchanged: ``ProblemSpec.key()`` leaves both out at
these defaults, so old keys still name their rows.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add xe2t_problems.head_dim_v (= head_dim for existing rows) and kv_dtype (NULL)."""
    with op.batch_alter_table("xe2t_problems") as batch:
        batch.add_column(sa.Column("head_dim_v", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("kv_dtype", sa.String(length=16), nullable=True))
    op.execute("UPDATE xe2t_problems SET head_dim_v = head_dim")
    with op.batch_alter_table("xe2t_problems") as batch:
        batch.alter_column("head_dim_v", existing_type=sa.Integer(), nullable=False)


def downgrade() -> None:
    """Drop xe2t_problems.head_dim_v and kv_dtype."""
    with op.batch_alter_table("xe2t_problems") as batch:
        batch.drop_column("kv_dtype")
        batch.drop_column("head_dim_v")
