// The portable tile-ops policy of the xmx mainloop: DPAS-shaped fragments held in private
// arrays with the Xe register ownership (sdpa_xmx_fragment.hpp), multiplied with subgroup
// shuffles. Runs on any device with 16-lane subgroups (the OpenCL CPU runtime started with
// CL_CONFIG_CPU_VECTORIZER_MODE=0), so the mainloop's logic is tested where there is no matrix
// engine. Correct, not fast: one multiply-add is 8 x 16 broadcasts and FMAs per lane.
//
// Layouts (lane j of the subgroup):
//   Acc: 8 x 16 fp32        x[r] = C[r][j]
//   A:   8 x 16 (M x K)     x[r] = A[r][j], fp32 values rounded to T (what DPAS reads)
//   B/BT: 16 x 16 (K x N)   x[k] = B[k][j]
#pragma once

#include "sdpa_xmx_fragment.hpp"

// The mainloop's fragment loops stay rolled: private arrays need no constant indices, and
// unrolled, the CPU runtime's vectorizer (mode 0) took 2-3x the build time (a hd64 config: 26-33
// instead of 11 s of CPU).
#define XE2T_XMX_FRAGMENT_LOOP _Pragma("unroll 1")

namespace xe2t::xmx {

template <class T>
struct SubgroupTileOps {
  static constexpr bool kUsesTailTile = false;  // loads clamp per lane: no local staging

  struct Acc {
    float x[kM];
  };
  struct A {
    float x[kM];
  };
  struct B {
    float x[kK];
  };
  using BT = B;

  static int lane(sycl::sub_group sg) { return static_cast<int>(sg.get_local_linear_id()); }

  static void fill(sycl::sub_group, Acc &c, float v) {
#pragma unroll
    for (int r = 0; r < kM; ++r) c.x[r] = v;
  }

  // A = p[0:8, 0:16] (row pitch `stride`), p in work-group local memory.
  static void load_a(sycl::sub_group sg, A &a, const T *p, size_t stride) {
    const int j = lane(sg);
#pragma unroll
    for (int r = 0; r < kM; ++r) a.x[r] = to_float(p[r * stride + j]);
  }

  // B[k][n] = K[key0 + n][d0 + k]: K^T from row-major K; lane n reads one key's 16 values.
  static void load_kt(sycl::sub_group sg, BT &b, const Rows<T> &k, int key0, int d0, T *) {
    const int key = key0 + lane(sg);
    const T *src = k.row(sycl::min(key, k.rows - 1)) + d0;
#pragma unroll
    for (int i = 0; i < kK; ++i) b.x[i] = key < k.rows ? to_float(src[i]) : 0.0f;
  }

  // B[k][n] = V[key0 + k][c0 + n]: lane n reads one column over 16 keys.
  static void load_v(sycl::sub_group sg, B &b, const Rows<T> &v, int key0, int c0, T *) {
    const int j = lane(sg);
#pragma unroll
    for (int i = 0; i < kK; ++i) {
      const int key = key0 + i;
      b.x[i] = key < v.rows ? to_float(v.row(key)[c0 + j]) : 0.0f;
    }
  }

  // C += A x B: C[r][j] += sum_k A[r][k] B[k][j], A[r][k] broadcast from lane k.
  template <class Bop>
  static void mad(sycl::sub_group sg, Acc &c, const A &a, const Bop &b) {
    for (int k = 0; k < kK; ++k) {
#pragma unroll
      for (int r = 0; r < kM; ++r)
        c.x[r] = sycl::fma(sycl::select_from_group(sg, a.x[r], k), b.x[k], c.x[r]);
    }
  }

  // f(x, row, col) on every element the lane holds.
  template <class F>
  static void apply(sycl::sub_group sg, Acc &c, F &&f) {
    const int j = lane(sg);
#pragma unroll
    for (int r = 0; r < kM; ++r) f(c.x[r], r, j);
  }

  // Folds the lane's elements into per-row partials (reduced across the subgroup by the caller).
  static void row_max(sycl::sub_group, Acc &c, float (&m)[kM]) {
#pragma unroll
    for (int r = 0; r < kM; ++r) m[r] = sycl::fmax(m[r], c.x[r]);
  }
  static void row_sum(sycl::sub_group, Acc &c, float (&s)[kM]) {
#pragma unroll
    for (int r = 0; r < kM; ++r) s[r] += c.x[r];
  }

  // The fp32 accumulator as the T operand A of the next product (same ownership).
  static void to_a(sycl::sub_group, Acc &c, A &a) {
#pragma unroll
    for (int r = 0; r < kM; ++r) a.x[r] = round_to<T>(c.x[r]);
  }

  // p[0:8, 0:16] = C (row pitch `stride`), p in `Space` memory.
  template <sycl::access::address_space Space>
  static void store(sycl::sub_group sg, Acc &c, float *p, size_t stride) {
    const int j = lane(sg);
#pragma unroll
    for (int r = 0; r < kM; ++r) p[r * stride + j] = c.x[r];
  }

  // Plain loads need no prefetch to be correct: the portable policy issues none.
  template <int R, int C>
  static void prefetch(sycl::sub_group, const T *, size_t) {}
};

}  // namespace xe2t::xmx
