"""Campaigns: problems with budgets tuned by many workers; the last heartbeat of a lease.

``xe2t_campaigns`` and ``xe2t_campaign_problems`` hold what ``xe2tune campaign create``
registers; ``xe2t_campaign_studies`` links a campaign to the study of each problem on each device
it runs on; ``xe2t_campaign_slots`` cuts each study's budget into slots held by one worker at a
time; ``xe2t_campaign_workers`` lists the workers that joined. ``xe2t_leases.renewed_at`` is the
last heartbeat of a lease (shown by ``campaign status``). A device is identified by its compute
units too (``uq_xe2t_devices_name_backend_driver_compute_units``): workers on two parts that differ
only in compute units must not share a study.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _fk(table: str, column: str, target: str, ondelete: str | None = "CASCADE"
        ) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint([column], [f"{target}.id"],
                                   name=op.f(f"fk_{table}_{column}_{target}"), ondelete=ondelete)


def _device_identity(old: tuple[str, ...], new: tuple[str, ...]) -> None:
    with op.batch_alter_table("xe2t_devices") as batch:
        batch.drop_constraint(op.f(f"uq_xe2t_devices_{'_'.join(old)}"), type_="unique")
        batch.create_unique_constraint(op.f(f"uq_xe2t_devices_{'_'.join(new)}"), list(new))


_OLD_IDENTITY = ("name", "backend", "driver")
_NEW_IDENTITY = (*_OLD_IDENTITY, "compute_units")


def upgrade() -> None:
    """Create the campaign tables, add xe2t_leases.renewed_at, identify devices by compute units
    too."""
    _device_identity(_OLD_IDENTITY, _NEW_IDENTITY)
    with op.batch_alter_table("xe2t_leases") as batch:
        batch.add_column(sa.Column("renewed_at", sa.DateTime(), nullable=True))
    op.create_table(
        "xe2t_campaigns",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("sampler", sa.String(length=64), nullable=False),
        sa.Column("trials", sa.Integer(), nullable=False),
        sa.Column("patience", sa.Integer(), nullable=True),
        sa.Column("confirm_rounds", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_xe2t_campaigns")),
        sa.UniqueConstraint("name", name=op.f("uq_xe2t_campaigns_name")),
    )
    op.create_table(
        "xe2t_campaign_problems",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("problem_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        _fk("xe2t_campaign_problems", "campaign_id", "xe2t_campaigns"),
        _fk("xe2t_campaign_problems", "problem_id", "xe2t_problems", None),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_xe2t_campaign_problems")),
        sa.UniqueConstraint("campaign_id", "problem_id",
                            name=op.f("uq_xe2t_campaign_problems_campaign_id_problem_id")),
    )
    op.create_table(
        "xe2t_campaign_studies",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("closed", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        _fk("xe2t_campaign_studies", "campaign_id", "xe2t_campaigns"),
        _fk("xe2t_campaign_studies", "study_id", "xe2t_studies"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_xe2t_campaign_studies")),
        sa.UniqueConstraint("campaign_id", "study_id",
                            name=op.f("uq_xe2t_campaign_studies_campaign_id_study_id")),
    )
    op.create_table(
        "xe2t_campaign_slots",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_study_id", sa.Integer(), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("trial_number", sa.Integer(), nullable=True),
        sa.Column("done", sa.Boolean(), nullable=False),
        sa.Column("claimed_at", sa.DateTime(), nullable=False),
        sa.Column("done_at", sa.DateTime(), nullable=True),
        _fk("xe2t_campaign_slots", "campaign_study_id", "xe2t_campaign_studies"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_xe2t_campaign_slots")),
        sa.UniqueConstraint("campaign_study_id", "slot",
                            name=op.f("uq_xe2t_campaign_slots_campaign_study_id_slot")),
    )
    op.create_index(op.f("ix_xe2t_campaign_slots_owner"), "xe2t_campaign_slots", ["owner"])
    op.create_table(
        "xe2t_campaign_workers",
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("seen_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        _fk("xe2t_campaign_workers", "campaign_id", "xe2t_campaigns"),
        _fk("xe2t_campaign_workers", "device_id", "xe2t_devices", None),
        sa.PrimaryKeyConstraint("owner", name=op.f("pk_xe2t_campaign_workers")),
    )
    op.create_index(op.f("ix_xe2t_campaign_workers_campaign_id"), "xe2t_campaign_workers",
                    ["campaign_id"])


def downgrade() -> None:
    """Drop the campaign tables and xe2t_leases.renewed_at; devices by (name, backend, driver)
    again (fails while two rows differ only in compute units: merge them first)."""
    for table in ("xe2t_campaign_workers", "xe2t_campaign_slots", "xe2t_campaign_studies",
                  "xe2t_campaign_problems", "xe2t_campaigns"):
        op.drop_table(table)
    with op.batch_alter_table("xe2t_leases") as batch:
        batch.drop_column("renewed_at")
    _device_identity(_NEW_IDENTITY, _OLD_IDENTITY)
