"""Initial schema: devices, kernel sources, problems, studies, trials and measurements.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the core tables."""
    op.create_table(
        "xe2t_devices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("backend", sa.String(length=64), nullable=False),
        sa.Column("device_type", sa.String(length=32), nullable=False),
        sa.Column("driver", sa.String(length=128), nullable=False),
        sa.Column("compute_units", sa.Integer(), nullable=False),
        sa.Column("global_mem_bytes", sa.BigInteger(), nullable=False),
        sa.Column("local_mem_bytes", sa.BigInteger(), nullable=False),
        sa.Column("max_work_group_size", sa.Integer(), nullable=False),
        sa.Column("sub_group_sizes", sa.JSON(), nullable=False),
        sa.Column("peak_flops", sa.JSON(), nullable=False),
        sa.Column("peak_bandwidth", sa.Float(), nullable=True),
        sa.Column("peak_source", sa.String(length=16), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_xe2t_devices")),
        sa.UniqueConstraint(
            "name", "backend", "driver", name=op.f("uq_xe2t_devices_name_backend_driver")
        ),
    )
    op.create_table(
        "xe2t_kernel_sources",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("family", sa.String(length=128), nullable=False),
        sa.Column("source_hash", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_xe2t_kernel_sources")),
        sa.UniqueConstraint(
            "family", "source_hash", name=op.f("uq_xe2t_kernel_sources_family_source_hash")
        ),
    )
    op.create_table(
        "xe2t_problems",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=512), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("head_dim", sa.Integer(), nullable=False),
        sa.Column("dtype", sa.String(length=16), nullable=False),
        sa.Column("q_len", sa.Integer(), nullable=False),
        sa.Column("kv_len", sa.Integer(), nullable=False),
        sa.Column("heads_q", sa.Integer(), nullable=False),
        sa.Column("heads_kv", sa.Integer(), nullable=False),
        sa.Column("batch", sa.Integer(), nullable=False),
        sa.Column("causal", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_xe2t_problems")),
        sa.UniqueConstraint("key", name=op.f("uq_xe2t_problems_key")),
    )
    op.create_index(
        "ix_xe2t_problems_lookup", "xe2t_problems", ["mode", "head_dim", "dtype", "causal"]
    )
    op.create_table(
        "xe2t_studies",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=False),
        sa.Column("kernel_source_id", sa.Integer(), nullable=False),
        sa.Column("problem_id", sa.Integer(), nullable=False),
        sa.Column("sampler", sa.String(length=64), nullable=False),
        sa.Column("optuna_study_name", sa.String(length=512), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["device_id"], ["xe2t_devices.id"],
            name=op.f("fk_xe2t_studies_device_id_xe2t_devices"),
        ),
        sa.ForeignKeyConstraint(
            ["kernel_source_id"], ["xe2t_kernel_sources.id"],
            name=op.f("fk_xe2t_studies_kernel_source_id_xe2t_kernel_sources"),
        ),
        sa.ForeignKeyConstraint(
            ["problem_id"], ["xe2t_problems.id"],
            name=op.f("fk_xe2t_studies_problem_id_xe2t_problems"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_xe2t_studies")),
        sa.UniqueConstraint(
            "device_id", "kernel_source_id", "problem_id",
            name=op.f("uq_xe2t_studies_device_id_kernel_source_id_problem_id"),
        ),
        sa.UniqueConstraint("optuna_study_name", name=op.f("uq_xe2t_studies_optuna_study_name")),
    )
    op.create_index(op.f("ix_xe2t_studies_problem_id"), "xe2t_studies", ["problem_id"])
    op.create_table(
        "xe2t_trials",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=True),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("is_default", sa.Boolean(), nullable=False),
        sa.Column("origin", sa.String(length=16), nullable=False),
        sa.Column("build_s", sa.Float(), nullable=False),
        sa.Column("verify_s", sa.Float(), nullable=False),
        sa.Column("bench_s", sa.Float(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"], ["xe2t_studies.id"],
            name=op.f("fk_xe2t_trials_study_id_xe2t_studies"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_xe2t_trials")),
        sa.UniqueConstraint(
            "study_id", "config_hash", name=op.f("uq_xe2t_trials_study_id_config_hash")
        ),
    )
    op.create_index("ix_xe2t_trials_study_status", "xe2t_trials", ["study_id", "status"])
    op.create_table(
        "xe2t_measurements",
        sa.Column("trial_id", sa.Integer(), nullable=False),
        *(sa.Column(name, sa.Float(), nullable=True) for name in (
            "median_s", "mean_s", "min_s", "max_s", "p10_s", "p90_s", "cv")),
        sa.Column("warmup", sa.Integer(), nullable=True),
        sa.Column("iterations", sa.Integer(), nullable=True),
        sa.Column("n_buf", sa.Integer(), nullable=True),
        sa.Column("host_overhead_s", sa.Float(), nullable=True),
        sa.Column("samples", sa.JSON(), nullable=True),
        *(sa.Column(name, sa.Float(), nullable=True) for name in (
            "flops", "bytes", "arithmetic_intensity", "achieved_flops", "achieved_bandwidth",
            "peak_flops", "peak_bandwidth", "attainable_flops", "roofline_fraction")),
        sa.Column("peak_source", sa.String(length=16), nullable=True),
        sa.Column("nonfinite", sa.Integer(), nullable=True),
        *(sa.Column(name, sa.Float(), nullable=True) for name in (
            "max_abs_error", "rel_l2_error", "atol", "rtol_l2")),
        sa.Column("passed", sa.Boolean(), nullable=True),
        sa.ForeignKeyConstraint(
            ["trial_id"], ["xe2t_trials.id"],
            name=op.f("fk_xe2t_measurements_trial_id_xe2t_trials"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("trial_id", name=op.f("pk_xe2t_measurements")),
    )


def downgrade() -> None:
    """Drop the core tables."""
    for table in ("xe2t_measurements", "xe2t_trials", "xe2t_studies", "xe2t_problems",
                  "xe2t_kernel_sources", "xe2t_devices"):
        op.drop_table(table)
