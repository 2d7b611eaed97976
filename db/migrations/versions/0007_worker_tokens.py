"""Worker tokens: credentials a campaign's remote workers present to the gRPC proxy and the API.

``xe2t_worker_tokens`` holds one row per token minted by ``xe2tune campaign token create``: the
campaign it is scoped to, a name for the operator, the token's sha256 (never the token) and when
it was revoked, if it was.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create xe2t_worker_tokens."""
    op.create_table(
        "xe2t_worker_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("token_sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["campaign_id"], ["xe2t_campaigns.id"],
                                name=op.f("fk_xe2t_worker_tokens_campaign_id_xe2t_campaigns"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_xe2t_worker_tokens")),
        sa.UniqueConstraint("token_sha256", name=op.f("uq_xe2t_worker_tokens_token_sha256")),
    )
    op.create_index(op.f("ix_xe2t_worker_tokens_campaign_id"), "xe2t_worker_tokens",
                    ["campaign_id"])


def downgrade() -> None:
    """Drop xe2t_worker_tokens (every minted token stops working)."""
    op.drop_table("xe2t_worker_tokens")
