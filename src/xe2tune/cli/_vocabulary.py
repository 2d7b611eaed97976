"""A launcher config as one line in the seed vocabulary (ShapeQK, ..., knobs; README's Glossary)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xe2tune.kernels import LauncherConfig


def seed_vocabulary(config: LauncherConfig | Mapping[str, Any]) -> str:
    """``family ShapeQK<BQ,BK,BD> ShapePV<BQ,BV,BK> ShapeOut<BQ,Dv> SG <q>x<k>/<lanes> Stages S
    VTiles V`` and every knob: two configs that differ in anything read differently.

    Raises:
        InvalidConfig: if a stored or given dict is not a config.
    """
    c = config if isinstance(config, LauncherConfig) else LauncherConfig.from_dict(dict(config))

    def shape(values: tuple[int, ...]) -> str:
        return "<" + ",".join(map(str, values)) + ">"

    knobs = "".join(f" {k}={v}" for k, v in c.knobs)
    return (f"{c.family} ShapeQK{shape(c.shape_qk)} ShapePV{shape(c.shape_pv)} "
            f"ShapeOut{shape(c.shape_out)} SG {c.subgroup_layout[0]}x{c.subgroup_layout[1]}/"
            f"{c.subgroup_size} Stages {c.stages} VTiles {c.vtiles}{knobs}")
