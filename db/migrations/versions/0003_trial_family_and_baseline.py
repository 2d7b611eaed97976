"""Every trial names its kernel family; seeded baselines carry their label.

A study may now span several kernel families (one optuna study per problem over the union of
the families that apply), so the family moves from the study's kernel source onto each trial,
and into the stored config, whose hash covers it. ``baseline`` labels the trials of seeded
baseline configs ("seed 000 SageV1", "SYCL*TLA example", "oneDNN default"); NULL for tuned ones.

The config form and hash are replicated here rather than imported, because a migration must
keep meaning what it meant when it was written: ``LauncherConfig.to_dict`` as of this revision
(shapes as int lists, ``vtiles`` = Dv / BV, knobs as a dict) and ``config_hash`` = the first 16
hex digits of sha256 over the JSON with sorted keys and no spaces.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_SHAPES = ("shape_qk", "shape_pv", "shape_out", "subgroup_layout")

_trials = sa.table(
    "xe2t_trials",
    sa.column("id", sa.Integer()),
    sa.column("study_id", sa.Integer()),
    sa.column("config", sa.JSON()),
    sa.column("config_hash", sa.String()),
    sa.column("family", sa.String()),
)
_studies = sa.table("xe2t_studies", sa.column("id", sa.Integer()),
                    sa.column("kernel_source_id", sa.Integer()))
_sources = sa.table("xe2t_kernel_sources", sa.column("id", sa.Integer()),
                    sa.column("family", sa.String()))


def _config_form(config: dict[str, Any], family: str | None) -> dict[str, Any]:
    """The to_dict form of a stored config, with ``family`` (or without it when None)."""
    form: dict[str, Any] = {name: [int(v) for v in config[name]] for name in _SHAPES}
    form.update(stages=int(config["stages"]), subgroup_size=int(config["subgroup_size"]),
                vtiles=form["shape_out"][1] // form["shape_pv"][1],
                knobs=dict(sorted(dict(config.get("knobs") or {}).items())))
    if family is not None:
        form["family"] = family
    return form


def _hash(form: dict[str, Any]) -> str:
    text = json.dumps(form, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def upgrade() -> None:
    """Add family (backfilled from the study's kernel source) and baseline; rehash configs."""
    with op.batch_alter_table("xe2t_trials") as batch:
        batch.add_column(sa.Column("family", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("baseline", sa.String(length=64), nullable=True))
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(_trials.c.id, _trials.c.config, _sources.c.family)
        .join(_studies, _studies.c.id == _trials.c.study_id)
        .join(_sources, _sources.c.id == _studies.c.kernel_source_id)
    ).all()
    updates = []
    for trial_id, config, family in rows:
        form = _config_form(config, family)
        updates.append({"trial_id": trial_id, "new_config": form, "new_hash": _hash(form),
                        "new_family": family})
    if updates:
        connection.execute(
            _trials.update().where(_trials.c.id == sa.bindparam("trial_id")).values(
                config=sa.bindparam("new_config", type_=sa.JSON()),
                config_hash=sa.bindparam("new_hash"), family=sa.bindparam("new_family")),
            updates,
        )
    with op.batch_alter_table("xe2t_trials") as batch:
        batch.alter_column("family", existing_type=sa.String(length=128), nullable=False)
        # results filtered by family; the baselines of the studies a best answer comes from
        batch.create_index("ix_xe2t_trials_family_status", ["family", "status"])
        batch.create_index("ix_xe2t_trials_study_baseline", ["study_id", "baseline"])


def downgrade() -> None:
    """Drop family and baseline; configs lose "family" and get their old hashes back.

    Refused when one study holds the same config in two families: without the family both
    would share one hash, which the (study_id, config_hash) constraint forbids.
    """
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(_trials.c.id, _trials.c.study_id, _trials.c.config, _trials.c.family)
    ).all()
    updates, seen = [], {}
    for trial_id, study_id, config, family in rows:
        form = _config_form(config, None)
        old_hash = _hash(form)
        other = seen.setdefault((study_id, old_hash), (trial_id, family))
        if other[0] != trial_id:
            raise RuntimeError(
                f"cannot downgrade below revision 0003: study {study_id} holds one config in "
                f"two families ({other[1]} trial {other[0]}, {family} trial {trial_id})")
        updates.append({"trial_id": trial_id, "new_config": form, "new_hash": old_hash})
    if updates:
        connection.execute(
            _trials.update().where(_trials.c.id == sa.bindparam("trial_id")).values(
                config=sa.bindparam("new_config", type_=sa.JSON()),
                config_hash=sa.bindparam("new_hash")),
            updates,
        )
    with op.batch_alter_table("xe2t_trials") as batch:
        batch.drop_index("ix_xe2t_trials_study_baseline")
        batch.drop_index("ix_xe2t_trials_family_status")
        batch.drop_column("baseline")
        batch.drop_column("family")
