"""Short human labels of problems and configs, shared by every dashboard view."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xe2tune.db import StudyRecord
    from xe2tune.kernels import LauncherConfig, ProblemSpec


def problem_label(problem: ProblemSpec) -> str:
    """e.g. ``prefill d128 fp16 q1024 kv1024 h8/8 b1 causal``; Dv and the K/V dtype only when
    not the default: ``decode d576 dv512 bf16 KV:e4m3 q1 kv4096 h128/1 b1``."""
    dv = f" dv{problem.head_dim_v}" if problem.is_mla else ""
    kv = f" KV:{problem.kv_dtype}" if problem.kv_dtype else ""
    label = (f"{problem.mode} d{problem.head_dim}{dv} {problem.dtype}{kv} q{problem.q_len} "
             f"kv{problem.kv_len} h{problem.heads_q}/{problem.heads_kv} b{problem.batch}")
    return label + (" causal" if problem.causal else "")


def config_label(config: LauncherConfig, *, with_family: bool = False) -> str:
    """A config in the seed vocabulary on one line, e.g. ``QK 128x64x32 PV 128x64x64 ...``.

    ``with_family`` leads with the kernel family (``sdpa_xmx_prefill QK ...``), for views
    without a family column where one problem's configs come from several families.
    """
    def shape(values: tuple[int, ...]) -> str:
        return "x".join(map(str, values))

    c = config
    family = f"{c.family} " if with_family else ""
    text = (f"{family}QK {shape(c.shape_qk)} PV {shape(c.shape_pv)} out {shape(c.shape_out)} "
            f"sg {shape(c.subgroup_layout)} stages {c.stages} vtiles {c.vtiles} "
            f"simd {c.subgroup_size}")
    if c.knobs:  # sorted by name already
        text += " " + " ".join(f"{k}={v}" for k, v in c.knobs)
    return text


def study_label(study: StudyRecord) -> str:
    """e.g. ``study 7: prefill d128 fp16 q1024 kv1024 h8/8 b1 on Arc B580 (sdpa_xmx_prefill,
    tpe)``."""
    return (f"study {study.id}: {problem_label(study.problem)} on {study.device_name} "
            f"({study.family}, {study.sampler})")
