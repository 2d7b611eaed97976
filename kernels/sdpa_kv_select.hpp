// Chooses a build's K/V operands, for both families' config headers (after xe2t_elem): the
// variants of sdpa_kv_variant.hpp when the build defines XE2T_DV (latent attention) or XE2T_KV
// (FP8 K/V), else K/V in xe2t_elem, Dv = D and no scale argument, exactly the MHA/GQA kernels
// as they were before the variants existed (tests/kernels/test_kv_variant_isolation.py).
#pragma once

#ifndef XE2T_KV
using xe2t_kv = xe2t_elem;
// FP8 K/V only: the kernels' K/V scale argument and where the scales apply.
#define XE2T_KV_SCALE_PARAM
#define XE2T_KV_K_SCALE(hkv)
#define XE2T_KV_V_SCALE(hkv)
#endif

#if defined(XE2T_DV) || defined(XE2T_KV)
#define XE2T_KV_VARIANT 1
#include "sdpa_kv_variant.hpp"
#else
#define XE2T_KV_VARIANT 0
#endif
