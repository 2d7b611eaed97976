// The K/V variants of both kernel families, included by sdpa_config.hpp and sdpa_xmx_config.hpp
// only for builds that define XE2T_DV (latent attention: V's head dim Dv differs from D) or
// XE2T_KV (FP8 K/V). MHA/GQA builds never see this file: their mainloops are instantiated on the
// element type itself.
//
// FP8 K/V (XE2T_KV 1 = e4m3, 2 = e5m2, OCP float8) are one byte per element, converted as they
// are loaded (to fp32 here, to Q's type in the xmx family); the dequantization scales never
// touch an element: the kernels take kv_scale [2, heads_kv] (K scales, then V scales; a
// per-tensor scale is one value repeated) and fold KV head h's K scale into its Q scale and its
// V scale into the output normalization.
#pragma once

#include "sdpa_fp8.hpp"
#include "sdpa_mainloop.hpp"

#ifndef XE2T_DV
#define XE2T_DV XE2T_D
#endif
#define XE2T_KV_DV XE2T_DV

#ifndef XE2T_KV  // xe2t_kv and the scale macros of K/V in xe2t_elem: sdpa_kv_select.hpp
template <int W>
using xe2t_kv_loader = xe2t::VecTileOps<W>;
#else
#if XE2T_KV == 1
using xe2t_kv = xe2t::fp8::e4m3;
#elif XE2T_KV == 2
using xe2t_kv = xe2t::fp8::e5m2;
#else
#error "XE2T_KV must be 1 (e4m3) or 2 (e5m2)"
#endif
template <int W>
using xe2t_kv_loader = xe2t::fp8::VecLoads<W>;
#define XE2T_KV_SCALE_PARAM , const float *kv_scale
// The loaders give value / kRebias (sdpa_fp8.hpp): the factor joins the scales.
#define XE2T_KV_K_SCALE(hkv) *(kv_scale[(hkv)] * xe2t_kv::kRebias)
#define XE2T_KV_V_SCALE(hkv) *(kv_scale[heads_kv + (hkv)] * xe2t_kv::kRebias)
#endif
