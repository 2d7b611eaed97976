"""The API's public models: what /v1 returns and accepts, separate from the ORM models.

The store's records (``xe2tune.db``: devices, studies, trials, result rows, submissions) are
already frozen, session-free pydantic values designed to go out as JSON, so the listing
endpoints return them as they are. The models here exist where the public shape differs from
storage: the launcher config in the seed's typed vocabulary, the ``/v1/best`` answer, pages,
health and errors.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from xe2tune.db import BaselineResult, BestQuery, BestResult, ResultRow
from xe2tune.kernels import LauncherConfig, ProblemSpec
from xe2tune.measurement import TrialStatus

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


class _Public(BaseModel):
    model_config = ConfigDict(frozen=True)


class LauncherConfigPublic(_Public):
    """A launcher config in the seed vocabulary (README's Glossary; ``kernels.LauncherConfig``)."""

    family: str = Field(description="the kernel family the config belongs to")
    shape_qk: tuple[int, int, int] = Field(description="(BQ, BK, BD) of the Q*K^T product")
    shape_pv: tuple[int, int, int] = Field(description="(BQ, BV, BK) of the P*V product")
    shape_out: tuple[int, int] = Field(description="(BQ, Dv) output tile")
    subgroup_layout: tuple[int, int] = Field(description="subgroups along (Q, K)")
    stages: int = Field(description="K blocks prefetched ahead")
    vtiles: int = Field(description="Dv / BV splits of the P*V product")
    subgroup_size: int
    knobs: dict[str, int | str | bool] = Field(description="the family's extra knobs")

    @classmethod
    def from_config(cls, config: LauncherConfig) -> LauncherConfigPublic:
        """The typed form of a record's config."""
        return cls.model_validate(config.to_dict())


class ProblemPublic(_Public):
    """The tuned problem an answer came from (fields of ``xe2tune.kernels.ProblemSpec``)."""

    mode: Literal["prefill", "decode"]
    head_dim: int
    dtype: Literal["fp16", "bf16", "fp32"]
    q_len: int
    kv_len: int
    heads_q: int
    heads_kv: int
    batch: int
    causal: bool
    # Left out at their defaults, as ProblemSpec.to_dict does: problems named before Dv and
    # kv_dtype existed read as they did.
    head_dim_v: int | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="V/O head dim Dv (latent attention); absent: head_dim")
    kv_dtype: Literal["e4m3", "e5m2"] | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="FP8 format K/V are stored in; absent: K/V in dtype")

    @classmethod
    def from_spec(cls, spec: ProblemSpec) -> ProblemPublic:
        """The public form of a problem."""
        return cls.model_validate(spec.to_dict())


class BaselinePublic(_Public):
    """A seeded baseline config's result on the problem a best answer was measured on."""

    label: str = Field(description='e.g. "seed 000 SageV1", "SYCL*TLA example", '
                                   '"oneDNN default"')
    family: str
    config: LauncherConfigPublic
    config_hash: str
    trial_id: int
    status: TrialStatus
    median_s: float | None = Field(description="median seconds; None when it did not run OK")
    speedup: float | None = Field(description="this baseline's median / the best's median")

    @classmethod
    def from_result(cls, baseline: BaselineResult) -> BaselinePublic:
        """The public form of a stored baseline result."""
        return cls.model_validate({**baseline.model_dump(),
                                   "config": LauncherConfigPublic.from_config(baseline.config)})


class BestPublic(_Public):
    """The best measured launcher config for a problem, and where it came from."""

    match: Literal["exact", "nearest"] = Field(
        description="exact: this problem was tuned; nearest: the closest tuned problem"
    )
    query: BestQuery | None = Field(default=None, description="what was asked (None in lists)")
    problem: ProblemPublic = Field(description="the tuned problem the config was measured on")
    config: LauncherConfigPublic
    config_hash: str
    device: str
    device_id: int
    family: str
    source_hash: str
    median_s: float = Field(description="median device time per launch, seconds")
    tflops: float | None
    gbps: float | None
    roofline_fraction: float | None = Field(
        description="achieved / attainable FLOP/s (min of compute roof, AI x bandwidth roof)"
    )
    peak_source: str | None = Field(description="catalog or measured device peaks")
    default_median_s: float | None
    speedup: float | None = Field(description="default config's median / this median")
    confirmed_rounds: int | None = Field(
        default=None,
        description="alternating rounds in which the best, the default and the baselines were "
                    "re-timed side by side (the medians and speedups above come from them); "
                    "None when the study was never confirmed")
    confirmed_at: datetime | None = None
    baseline: str | None = Field(default=None,
                                 description="the label when the best is a seeded baseline")
    baselines: list[BaselinePublic] = Field(
        default_factory=list,
        description="every seeded baseline stored for the problem, with the best's speedup")
    study_id: int
    trial_id: int
    measured_at: datetime

    @classmethod
    def from_result(cls, best: BestResult) -> BestPublic:
        """The public form of a store answer."""
        return cls(
            match=best.match, query=best.query, problem=ProblemPublic.from_spec(best.problem),
            config=LauncherConfigPublic.from_config(best.config), config_hash=best.config_hash,
            device=best.device, device_id=best.device_id, family=best.family,
            source_hash=best.source_hash, median_s=best.median_s, tflops=best.tflops,
            gbps=best.gbps, roofline_fraction=best.roofline_fraction,
            peak_source=best.peak_source, default_median_s=best.default_median_s,
            speedup=best.speedup, confirmed_rounds=best.confirmed_rounds,
            confirmed_at=best.confirmed_at, baseline=best.baseline,
            baselines=[BaselinePublic.from_result(b) for b in best.baselines],
            study_id=best.study_id, trial_id=best.trial_id, measured_at=best.measured_at,
        )


class ConfigsPublic(_Public):
    """The best config of every tuned problem, as ``xe2tune export --format json`` writes it."""

    format: Literal["xe2tune-best-configs"]
    version: int
    configs: list[BestPublic]


class ResultPage(_Public):
    """One page of results, newest first; ``next_offset`` is None on the last page."""

    items: list[ResultRow]
    total: int
    limit: int
    offset: int
    next_offset: int | None


class Health(_Public):
    """Liveness plus the database's change counter."""

    status: Literal["ok"]
    database: str
    data_version: int


class ErrorPublic(_Public):
    """Every 4xx/5xx body: one line saying what was wrong and what is accepted."""

    detail: str


class ValidationErrorPublic(ErrorPublic):
    """A 422: ``detail`` names each bad parameter; ``errors`` has pydantic's itemised form."""

    errors: list[dict[str, object]]
