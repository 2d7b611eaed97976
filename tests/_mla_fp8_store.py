"""Latent attention (Dv != D) and FP8 K/V problems tuned beside MHA ones, for the database and
API tests: the MHA/fp16-K/V problems are the fastest and sit exactly at the lengths the tests ask
for, so an answer that crossed Dv or kv_dtype would win on every other count."""

from __future__ import annotations

from xe2tune.db import BestQuery, ResultStore
from xe2tune.kernels import LauncherConfig, ProblemSpec
from xe2tune.testing import launcher_config, ok_result, prefill, tune

MHA_192 = prefill(1024, head_dim=192, heads_q=16, heads_kv=16)
MLA_PREFILL = ProblemSpec(mode="prefill", head_dim=192, head_dim_v=128, dtype="fp16",
                          q_len=4096, kv_len=4096, heads_q=16, heads_kv=16)
MHA_DECODE = ProblemSpec(mode="decode", head_dim=128, dtype="fp16", q_len=1, kv_len=4096,
                         heads_q=32, heads_kv=8)
FP8_DECODE = ProblemSpec(mode="decode", head_dim=128, dtype="fp16", kv_dtype="e4m3", q_len=1,
                         kv_len=16384, heads_q=32, heads_kv=8)
# MLA decode: one latent K/V head shared by 16 and by 128 query heads
MLA_DECODE = tuple(ProblemSpec(mode="decode", head_dim=192, head_dim_v=128, dtype="bf16",
                               q_len=1, kv_len=8192, heads_q=hq, heads_kv=1) for hq in (16, 128))
FP8_MLA_DECODE = ProblemSpec(mode="decode", head_dim=192, head_dim_v=128, dtype="bf16",
                             kv_dtype="e5m2", q_len=1, kv_len=8192, heads_q=128, heads_kv=1)
# absorbed MLA decode: D 576 comes with Dv 512 when no Dv is named, in queries too
ABSORBED_MLA_DECODE = ProblemSpec(mode="decode", head_dim=576, dtype="bf16", q_len=1,
                                  kv_len=4096, heads_q=16, heads_kv=1)
TUNED = ((MHA_192, 1e-4), (MLA_PREFILL, 5e-3), (MHA_DECODE, 1e-5), (FP8_DECODE, 4e-4),
         (MLA_DECODE[0], 2e-4), (MLA_DECODE[1], 9e-4), (FP8_MLA_DECODE, 6e-4),
         (ABSORBED_MLA_DECODE, 3e-4))


def _config_for(problem: ProblemSpec, bq: int) -> LauncherConfig:
    family = "sdpa_prefill" if problem.mode == "prefill" else "sdpa_decode"
    return launcher_config(bq, head_dim=problem.head_dim_v, family=family)


def fill(store: ResultStore) -> dict[ProblemSpec, str]:
    """Tune every problem of TUNED; the config hash of each one's best."""
    hashes = {}
    for index, (problem, median) in enumerate(TUNED):
        best = _config_for(problem, 16 * (index + 1))
        tune(store, problem, [ok_result(_config_for(problem, 8), median * 2),
                              ok_result(best, median)],
             family="sdpa_prefill" if problem.mode == "prefill" else "sdpa_decode")
        hashes[problem] = best.config_hash()
    return hashes


# (query, the tuned problem that must answer it, or None: nothing of its group is tuned)
CASES = [
    (BestQuery(head_dim=192, dtype="fp16", seq=1024, heads_q=16), MHA_192),
    (BestQuery(head_dim=192, head_dim_v=192, dtype="fp16", seq=1024), MHA_192),
    (BestQuery(head_dim=192, head_dim_v=128, dtype="fp16", seq=1024), MLA_PREFILL),
    (BestQuery(head_dim=192, head_dim_v=128, dtype="fp16", seq=4096), MLA_PREFILL),
    (BestQuery(head_dim=192, head_dim_v=64, dtype="fp16", seq=4096), None),
    (BestQuery(head_dim=128, dtype="fp16", seq=16384, mode="decode"), MHA_DECODE),
    (BestQuery(head_dim=128, dtype="fp16", kv_dtype="e4m3", seq=4096, mode="decode"),
     FP8_DECODE),
    (BestQuery(head_dim=128, dtype="fp16", kv_dtype="e5m2", seq=4096, mode="decode"), None),
    (BestQuery(head_dim=192, head_dim_v=128, dtype="bf16", seq=8192, mode="decode",
               heads_q=128, heads_kv=1), MLA_DECODE[1]),
    (BestQuery(head_dim=192, head_dim_v=128, dtype="bf16", seq=8192, mode="decode",
               heads_q=16, heads_kv=1), MLA_DECODE[0]),
    (BestQuery(head_dim=192, head_dim_v=128, dtype="bf16", kv_dtype="e5m2", seq=2048,
               mode="decode", heads_q=16), FP8_MLA_DECODE),
    (BestQuery(head_dim=192, dtype="bf16", seq=8192, mode="decode"), None),
    (BestQuery(head_dim=576, dtype="bf16", seq=4096, mode="decode"), ABSORBED_MLA_DECODE),
    (BestQuery(head_dim=576, head_dim_v=512, dtype="bf16", seq=4096, mode="decode",
               heads_q=16), ABSORBED_MLA_DECODE),
    (BestQuery(head_dim=576, head_dim_v=512, dtype="fp16", seq=4096, mode="decode"), None),
]
