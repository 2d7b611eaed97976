"""Reads sized for a dashboard at lab scale: numeric columns first, details only for few trials.

A device of a lab database holds 10^5-10^6 measured configs. Drawing them all is pointless (a
chart has fewer pixels), so the roofline reads only the numbers a downsampler needs for every
OK trial (:func:`roofline_points`, no config JSON, no ORM objects) and then the labels of the
few thousand trials it keeps (:func:`trial_details`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Text, cast, select

from xe2tune.db._convert import problem_spec, stored_config
from xe2tune.db._models import Measurement, Problem, Study, Trial
from xe2tune.measurement import TrialStatus

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.orm import Session

    from xe2tune.kernels import LauncherConfig, ProblemSpec

DETAIL_CHUNK = 500  # ids per IN (...) list: under SQLite's bound-parameter limit


@dataclass(frozen=True)
class RooflinePoints:
    """Every OK trial of one device with roofline figures, as parallel arrays."""

    trial_id: np.ndarray  # int64
    ai: np.ndarray  # FLOP/byte
    flops: np.ndarray  # achieved FLOP/s
    baseline: np.ndarray  # bool: a seeded baseline config
    dtype: np.ndarray  # object: the problem's dtype
    peak_flops: np.ndarray  # the peak each fraction was computed from (NaN when none)
    peak_bandwidth: np.ndarray


@dataclass(frozen=True)
class TrialDetail:
    """What a hover or a table row says about one trial."""

    trial_id: int
    study_id: int
    problem: ProblemSpec
    config: LauncherConfig
    family: str
    baseline: str | None
    median_s: float | None
    achieved_flops: float | None
    roofline_fraction: float | None


def roofline_points(session: Session, device_id: int) -> RooflinePoints:
    """The device's OK trials with positive intensity and FLOP/s, in trial id order.

    Fetched through the driver's cursor: 10^5-10^6 rows of plain numbers, where building a
    SQLAlchemy row per trial would cost more than the query.
    """
    import numpy as np  # here, not at import: the CLI's read commands need no NumPy

    dtypes = {study_id: dtype for study_id, dtype in session.execute(
        select(Study.id, Problem.dtype).join(Problem, Problem.id == Study.problem_id)
        .where(Study.device_id == device_id))}
    stmt = (
        select(Trial.id, Trial.study_id, Trial.baseline.is_not(None),
               Measurement.arithmetic_intensity, Measurement.achieved_flops,
               Measurement.peak_flops, Measurement.peak_bandwidth)
        .join(Study, Study.id == Trial.study_id)
        .join(Measurement, Measurement.trial_id == Trial.id)
        .where(Study.device_id == device_id, Trial.status == TrialStatus.OK.value,
               Measurement.arithmetic_intensity > 0, Measurement.achieved_flops > 0)
        .order_by(Trial.id)
    )
    connection = session.connection()
    compiled = stmt.compile(dialect=connection.dialect, compile_kwargs={"literal_binds": True})
    cursor = connection.connection.driver_connection.cursor()
    try:
        cursor.execute(str(compiled))
        rows = cursor.fetchall()
    finally:
        cursor.close()

    def column(index: int, kind: type) -> np.ndarray:
        return np.fromiter((r[index] for r in rows), dtype=kind, count=len(rows))

    study_ids = column(1, np.int64)
    studies, inverse = np.unique(study_ids, return_inverse=True)
    return RooflinePoints(
        trial_id=column(0, np.int64), ai=column(3, float), flops=column(4, float),
        baseline=column(2, bool),
        dtype=np.asarray([dtypes[int(s)] for s in studies], dtype=object)[inverse]
        if len(rows) else np.empty(0, dtype=object),
        peak_flops=np.fromiter((np.nan if r[5] is None else r[5] for r in rows), float,
                               len(rows)),
        peak_bandwidth=np.fromiter((np.nan if r[6] is None else r[6] for r in rows), float,
                                   len(rows)),
    )


def trial_details(session: Session, trial_ids: list[int]) -> dict[int, TrialDetail]:
    """Problem, config and numbers of the given trials, by id (unknown ids are left out)."""
    found: dict[int, TrialDetail] = {}
    problems: dict[int, ProblemSpec] = {}
    configs: dict[str, LauncherConfig] = {}  # a search measures one config on many problems
    for start in range(0, len(trial_ids), DETAIL_CHUNK):
        chunk = trial_ids[start:start + DETAIL_CHUNK]
        stmt = (
            select(Trial.id, Trial.study_id, cast(Trial.config, Text), Trial.family,
                   Trial.baseline, Measurement.median_s, Measurement.achieved_flops,
                   Measurement.roofline_fraction, Problem)
            .join(Study, Study.id == Trial.study_id)
            .join(Problem, Problem.id == Study.problem_id)
            .outerjoin(Measurement, Measurement.trial_id == Trial.id)
            .where(Trial.id.in_(chunk))
        )
        for (trial_id, study_id, config, family, baseline, median, flops, fraction,
             problem) in session.execute(stmt):
            if problem.id not in problems:
                problems[problem.id] = problem_spec(problem)
            if config not in configs:
                configs[config] = stored_config(json.loads(config), trial_id)
            found[trial_id] = TrialDetail(
                trial_id=trial_id, study_id=study_id, problem=problems[problem.id],
                config=configs[config], family=family, baseline=baseline, median_s=median,
                achieved_flops=flops, roofline_fraction=fraction)
    return found
