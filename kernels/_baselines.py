"""Published Xe2 launcher configs, as parameters of the matrix-engine (xmx) families.

Sources (see docs/xe2-facts.md): seed 000's SageV1 launcher; SYCL*TLA's BMG
flash-attention example shapes (subgroups along Q, 2 stages prefill, 1 decode); oneDNN's shipped
Xe2 SDPA table, whose first GEMM is S = K^T Q with a work-group of (unroll_m_kq * wg_m_kq) keys x
(unroll_n_kq * wg_n_kq) queries and wg_m_kq x wg_n_kq subgroups: its subgroups split keys as well
as queries, which maps to subgroup_layout (sg_q = wg_n_kq, sg_k = wg_m_kq); its V split is
unroll_m_vs (32 here); oneDNN does not slice the head dim of the first GEMM the way seed 000 does,
so BD is set to 32, the seed's slice.

Every baseline uses 256 registers per thread (seed 002: Xe2 SDPA tiles are always built with
doubleGRF) except oneDNN's hd128 decode (8 subgroups; no doubleGRF in its table); decode entries
use one K/V chunk per 1024 keys. oneDNN's prefill rows and its hd128 decode row do not fit this
family: its P x V product splits Dv across subgroups, while here (seed 000) each subgroup holds O
for its rows over the whole Dv, which alone takes 256-512 registers for those tiles; they stay in
the table, and validation says why they are not run.
"""

from __future__ import annotations

from typing import Any

SEED_SAGEV1 = "seed 000 SageV1"
SYCLTLA = "SYCL*TLA example"
ONEDNN = "oneDNN default"

# (label, mode, head dims it was published for, parameters)
XMX_BASELINES: tuple[tuple[str, str, tuple[int, ...], dict[str, Any]], ...] = (
    (SEED_SAGEV1, "prefill", (128,),
     {"bq": 256, "bk": 64, "bd": 32, "bv": 32, "sg_q": 16, "sg_k": 1, "stages": 2, "grf": 256}),
    (SYCLTLA, "prefill", (64, 96),
     {"bq": 128, "bk": 64, "bd": 32, "bv": 32, "sg_q": 8, "sg_k": 1, "stages": 2, "grf": 256}),
    (SYCLTLA, "prefill", (128,),
     {"bq": 256, "bk": 32, "bd": 32, "bv": 32, "sg_q": 16, "sg_k": 1, "stages": 2, "grf": 256}),
    (SYCLTLA, "prefill", (192,),
     {"bq": 256, "bk": 64, "bd": 32, "bv": 32, "sg_q": 32, "sg_k": 1, "stages": 2, "grf": 256}),
    # BD 64 slices every head dim but 96.
    (SYCLTLA, "decode", (64, 128, 192, 256),
     {"bq": 8, "bk": 512, "bd": 64, "bv": 32, "sg_q": 1, "sg_k": 8, "stages": 1, "grf": 256,
      "kv_chunk": 1024}),
    # oneDNN 16,64,32,16,8,2,2,8: 128 keys x 128 queries, 8 x 2 subgroups
    (ONEDNN, "prefill", (64,),
     {"bq": 128, "bk": 128, "bd": 32, "bv": 32, "sg_q": 2, "sg_k": 8, "stages": 1, "grf": 256}),
    # oneDNN 16,64,32,16,16,2,4,8: 256 keys x 128 queries, 16 x 2 subgroups
    (ONEDNN, "prefill", (128,),
     {"bq": 128, "bk": 256, "bd": 32, "bv": 32, "sg_q": 2, "sg_k": 16, "stages": 1, "grf": 256}),
    # oneDNN 16,32,32,32,8,4,8,4: 128 keys x 128 queries, 8 x 4 subgroups
    (ONEDNN, "prefill", (256,),
     {"bq": 128, "bk": 128, "bd": 32, "bv": 32, "sg_q": 4, "sg_k": 8, "stages": 1, "grf": 256}),
    # oneDNN 64,16,16,16,8,1,4,1: 512 keys x 16 queries, 8 x 1 subgroups (its 16 rows of O in
    # fp32 need the 256-register mode)
    (ONEDNN, "decode", (64,),
     {"bq": 16, "bk": 512, "bd": 32, "bv": 32, "sg_q": 1, "sg_k": 8, "stages": 1, "grf": 256,
      "kv_chunk": 1024}),
    # oneDNN 32,32,32,16,8,1,4,2: 256 keys x 32 queries, 8 x 1 subgroups
    (ONEDNN, "decode", (128,),
     {"bq": 32, "bk": 256, "bd": 32, "bv": 32, "sg_q": 1, "sg_k": 8, "stages": 1, "grf": 128,
      "kv_chunk": 1024}),
)


def xmx_baseline_params(mode: str, head_dim: int) -> list[tuple[str, dict[str, Any]]]:
    """(label, parameters) of every published config for a mode and head dim."""
    return [(label, dict(params)) for label, m, dims, params in XMX_BASELINES
            if m == mode and head_dim in dims]
