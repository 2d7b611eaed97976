"""The data version at which each study's results last changed.

``xe2t_studies.results_version`` is set, in the same transaction, to the ``data_version`` a
write bumped to whenever the write adds trials, measurements or confirmation rounds of the
study, so a reader holding the bests of an earlier version re-reads only the problems whose
results changed since (``ResultStore.best_per_problem_since``). Existing studies start at 0: a
reader's first read takes every study.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add xe2t_studies.results_version (0 for existing studies) and its index."""
    with op.batch_alter_table("xe2t_studies") as batch:
        batch.add_column(sa.Column("results_version", sa.BigInteger(), nullable=False,
                                   server_default="0"))
        batch.create_index(op.f("ix_xe2t_studies_results_version"), ["results_version"])


def downgrade() -> None:
    """Drop xe2t_studies.results_version."""
    with op.batch_alter_table("xe2t_studies") as batch:
        batch.drop_index(op.f("ix_xe2t_studies_results_version"))
        batch.drop_column("results_version")
