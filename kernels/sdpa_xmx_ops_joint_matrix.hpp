// The matrix-engine tile-ops policy of the xmx mainloop: sycl::ext::oneapi::experimental::matrix
// (SPV_KHR_cooperative_matrix), DPAS 8 x 16 x 16 with fp16/bf16 operands and fp32 accumulators.
// Same operations and fragment shapes as the portable SubgroupTileOps; the element ownership
// inside a fragment is the implementation's, so every element-wise step goes through the
// coordinate-passing joint_matrix_apply.
//
// Tails: a 16-key fragment that crosses the end of K/V (kv_len) is copied, zero-padded, into a
// 16 x 16 tile of the subgroup's own local memory and loaded from there: a plain
// joint_matrix_load would read past the end of the buffer, and the checked (out-of-bounds) loads
// are marked failing on BMG in intel/llvm's own tests.
#pragma once

#include "sdpa_xmx_fragment.hpp"

// The mainloop's fragment loops are fully unrolled: arrays of joint_matrix need constant
// indices, and the multiply-add count of the program then follows from the shape alone.
#define XE2T_XMX_FRAGMENT_LOOP _Pragma("unroll")

namespace xe2t::xmx {

namespace jm = sycl::ext::oneapi::experimental::matrix;
namespace jmi = sycl::ext::intel::experimental::matrix;

template <class T>
struct JointMatrixTileOps {
  static constexpr bool kUsesTailTile = true;  // kN x kK elements of T per subgroup

  using Acc = jm::joint_matrix<sycl::sub_group, float, jm::use::accumulator, kM, kN>;
  using A = jm::joint_matrix<sycl::sub_group, T, jm::use::a, kM, kK, jm::layout::row_major>;
  using B = jm::joint_matrix<sycl::sub_group, T, jm::use::b, kK, kN, jm::layout::row_major>;
  // K^T straight from row-major K (ext_intel_packed would expect VNNI-packed data).
  using BT = jm::joint_matrix<sycl::sub_group, T, jm::use::b, kK, kN, jm::layout::col_major>;

  template <sycl::access::address_space Space, class U>
  static auto ptr(U *p) {
    return sycl::address_space_cast<Space, sycl::access::decorated::no>(p);
  }
  static constexpr auto kGlobal = sycl::access::address_space::global_space;
  static constexpr auto kLocal = sycl::access::address_space::local_space;

  static void fill(sycl::sub_group sg, Acc &c, float v) { jm::joint_matrix_fill(sg, c, v); }

  static void load_a(sycl::sub_group sg, A &a, const T *p, size_t stride) {
    jm::joint_matrix_load(sg, a, ptr<kLocal>(p), stride);
  }

  static void load_kt(sycl::sub_group sg, BT &b, const Rows<T> &k, int key0, int d0, T *tile) {
    if (key0 + kN <= k.rows) {
      jm::joint_matrix_load(sg, b, ptr<kGlobal>(k.row(key0) + d0), k.stride);
      return;
    }
    // tile[n][i] = K[key0 + n][d0 + i]: col-major K^T with pitch kK.
    const int n = static_cast<int>(sg.get_local_linear_id());
    const bool in = key0 + n < k.rows;
    const T *src = k.row(in ? key0 + n : 0) + d0;
#pragma unroll
    for (int i = 0; i < kK; ++i) tile[n * kK + i] = in ? src[i] : from_float<T>(0.0f);
    sycl::group_barrier(sg);
    jm::joint_matrix_load(sg, b, ptr<kLocal>(tile), kK);
    sycl::group_barrier(sg);  // the tile is rewritten by the next tail load
  }

  static void load_v(sycl::sub_group sg, B &b, const Rows<T> &v, int key0, int c0, T *tile) {
    if (key0 + kK <= v.rows) {
      jm::joint_matrix_load(sg, b, ptr<kGlobal>(v.row(key0) + c0), v.stride);
      return;
    }
    // tile[i][n] = V[key0 + i][c0 + n], row-major with pitch kN.
    const int n = static_cast<int>(sg.get_local_linear_id());
#pragma unroll
    for (int i = 0; i < kK; ++i)
      tile[i * kN + n] = key0 + i < v.rows ? v.row(key0 + i)[c0 + n] : from_float<T>(0.0f);
    sycl::group_barrier(sg);
    jm::joint_matrix_load(sg, b, ptr<kLocal>(tile), kN);
    sycl::group_barrier(sg);
  }

  template <class Bop>
  static void mad(sycl::sub_group sg, Acc &c, A &a, Bop &b) {
    jm::joint_matrix_mad(sg, c, a, b, c);
  }

  template <class F>
  static void apply(sycl::sub_group sg, Acc &c, F &&f) {
    jmi::joint_matrix_apply(sg, c, [&](float &x, size_t row, size_t col) {
      f(x, static_cast<int>(row), static_cast<int>(col));
    });
  }

  static void row_max(sycl::sub_group sg, Acc &c, float (&m)[kM]) {
    apply(sg, c, [&](float &x, int row, int) { m[row] = sycl::fmax(m[row], x); });
  }
  static void row_sum(sycl::sub_group sg, Acc &c, float (&s)[kM]) {
    apply(sg, c, [&](float &x, int row, int) { s[row] += x; });
  }

  static void to_a(sycl::sub_group sg, Acc &c, A &a) { jm::joint_matrix_copy(sg, c, a); }

  template <sycl::access::address_space Space>
  static void store(sycl::sub_group sg, Acc &c, float *p, size_t stride) {
    jm::joint_matrix_store(sg, c, ptr<Space>(p), stride, jm::layout::row_major);
  }

  // R x C elements of T from p (row pitch `stride`) towards L1.
  template <int R, int C>
  static void prefetch(sycl::sub_group sg, const T *p, size_t stride) {
    namespace syclexp = sycl::ext::oneapi::experimental;
    jm::joint_matrix_prefetch<R, C>(sg, const_cast<T *>(p), stride, jm::layout::row_major,
                                    syclexp::properties{syclexp::prefetch_hint_L1});
  }
};

}  // namespace xe2t::xmx
