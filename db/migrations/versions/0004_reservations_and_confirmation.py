"""Leases and config reservations for concurrent searches; confirmation rounds of a study's best.

``xe2t_leases`` holds one row per running search process (its host, pid and heartbeat expiry);
``xe2t_reservations`` holds the configs a search is measuring, unique per (study, config hash),
so two searches of one problem never measure the same config. ``xe2t_confirmations`` records
each confirmation round: the top configs, the default and the baselines re-timed side by side in
alternating rounds, and the best and speedups that round found.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create xe2t_leases, xe2t_reservations and xe2t_confirmations."""
    op.create_table(
        "xe2t_leases",
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("owner", name=op.f("pk_xe2t_leases")),
    )
    op.create_table(
        "xe2t_reservations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("trial_number", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"], ["xe2t_studies.id"],
            name=op.f("fk_xe2t_reservations_study_id_xe2t_studies"), ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["owner"], ["xe2t_leases.owner"],
            name=op.f("fk_xe2t_reservations_owner_xe2t_leases"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_xe2t_reservations")),
        sa.UniqueConstraint(
            "study_id", "config_hash", name=op.f("uq_xe2t_reservations_study_id_config_hash")
        ),
    )
    op.create_index(op.f("ix_xe2t_reservations_owner"), "xe2t_reservations", ["owner"])
    op.create_table(
        "xe2t_confirmations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("rounds", sa.Integer(), nullable=False),
        sa.Column("best_trial_id", sa.Integer(), nullable=False),
        sa.Column("best_median_s", sa.Float(), nullable=False),
        sa.Column("default_median_s", sa.Float(), nullable=True),
        sa.Column("entries", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"], ["xe2t_studies.id"],
            name=op.f("fk_xe2t_confirmations_study_id_xe2t_studies"), ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["best_trial_id"], ["xe2t_trials.id"],
            name=op.f("fk_xe2t_confirmations_best_trial_id_xe2t_trials"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_xe2t_confirmations")),
    )
    op.create_index(op.f("ix_xe2t_confirmations_study_id"), "xe2t_confirmations", ["study_id"])


def downgrade() -> None:
    """Drop the three tables."""
    op.drop_table("xe2t_confirmations")
    op.drop_table("xe2t_reservations")
    op.drop_table("xe2t_leases")
