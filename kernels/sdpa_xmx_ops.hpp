// The tile ops of the xmx mainloop: DPAS-shaped fragments in the Xe register layout
// (sdpa_xe_builtins.hpp: lane j holds column j of every fragment), multiplied by DPAS, loaded
// by 2D block messages, and the row-wise softmax steps on them. Written once over
// xe::Builtins, so the native build (Intel GPUs) and the emulated one (the CPU's correctness
// grid) own every element the same way.
//
// Row vectors: a per-row quantity of an 8-row fragment (row max, sum, rescale, last key) is one
// float per lane, lane j holding row j / 2 (RowVec): a butterfly of 8 shuffles reduces the 8
// rows of a fragment over the 16 lanes into that form (32 shuffles as 8 separate reductions),
// and row r's value reaches every lane as a broadcast from lane 2r.
#pragma once

#include "sdpa_xe_builtins.hpp"
#include "sdpa_xmx_fragment.hpp"

namespace xe2t::xmx {

template <class T>
struct XeTileOps {
  using Builtins = xe::Builtins;
  using Elem = T;
  using Acc = xe::Frag8;  // C[r][lane]
  using A = xe::Half8;    // A[r][lane], bits of T
  using B = xe::Pair8;    // B[2p][lane] | B[2p + 1][lane] << 16, bits of T
  using RowVec = float;   // row lane / 2 of an 8-row fragment
  using Float4 = float __attribute__((ext_vector_type(4)));
  using Float2 = float __attribute__((ext_vector_type(2)));
  static constexpr bool kIsBf16 = std::is_same_v<T, bf16_t>;

  static int lane(sycl::sub_group sg) { return static_cast<int>(sg.get_local_linear_id()); }
  // The fragment row this lane's RowVec element belongs to.
  static int row_of_lane(sycl::sub_group sg) { return lane(sg) / 2; }

  static void fill(sycl::sub_group, Acc &c, float v) { c = v; }

  // An 8 x 16 Q fragment stored contiguously in local memory (the mainloop's tile-major Q).
  static void load_a(sycl::sub_group sg, A &a, const T *tile) {
    a = Builtins::load_local_tile(sg, reinterpret_cast<const std::uint16_t *>(tile));
  }

  static xe::Surface surface(const Rows<T> &m) {
    return {m.base, m.cols * 2, m.rows, static_cast<int>(m.stride * 2)};
  }

  // B[k][n] = K[key0 + n][d0 + k]: K^T from row-major K, a transposed 2D block load of 16
  // keys x 8 dwords; keys at or past kv_len read 0.
  static void load_kt(sycl::sub_group sg, B &b, const Rows<T> &k, int key0, int d0) {
    b = Builtins::load_transposed(sg, surface(k), d0 / 2, key0);
  }

  // B[k][n] = V[key0 + k][c0 + n]: a VNNI-transformed 2D block load of 16 keys x 16 columns.
  static void load_v(sycl::sub_group sg, B &b, const Rows<T> &v, int key0, int c0) {
    b = Builtins::load_vnni(sg, surface(v), c0, key0);
  }

  static void mad(sycl::sub_group sg, Acc &c, const A &a, const B &b) {
    c = Builtins::template dpas<kIsBf16>(sg, c, a, b);
  }

  // f(x, row, col) on every element the lane holds.
  template <class F>
  static void apply(sycl::sub_group sg, Acc &c, F &&f) {
    const int j = lane(sg);
#pragma unroll
    for (int r = 0; r < kM; ++r) {
      float x = c[r];  // a vector element cannot bind to a reference
      f(x, r, j);
      c[r] = x;
    }
  }

  // Row r's value of a RowVec, in every lane.
  static float row(sycl::sub_group sg, RowVec v, int r) {
    return sycl::select_from_group(sg, v, 2 * r);
  }

  // The N fragments' rows reduced over their 16 x N columns with op, as a RowVec: op over the
  // fragments in each lane, then the butterfly (offsets 8, 4, 2, 1; at each step a lane keeps
  // the half of its rows that its partner does not).
  template <int N, class Op>
  static RowVec row_reduce(sycl::sub_group sg, const Acc (&c)[N], Op op) {
    Acc x = c[0];
#pragma unroll
    for (int n = 1; n < N; ++n)
#pragma unroll
      for (int r = 0; r < kM; ++r) x[r] = op(x[r], c[n][r]);
    // Halves are selected as whole vectors: a select between two elements of an array
    // becomes a dynamically indexed load, which puts the array in private memory.
    const int j = lane(sg);
    const Float4 h4 = exchange<Float4>(sg, op, j & 8 ? x.hi : x.lo, j & 8 ? x.lo : x.hi, 8);
    const Float2 h2 = exchange<Float2>(sg, op, j & 4 ? h4.hi : h4.lo, j & 4 ? h4.lo : h4.hi, 4);
    const float h1 = exchange<float>(sg, op, j & 2 ? h2.y : h2.x, j & 2 ? h2.x : h2.y, 2);
    return op(h1, sycl::permute_group_by_xor(sg, h1, 1));
  }

  // op(keep, the partner's give) element-wise: one butterfly step at lane distance `offset`.
  template <class V, class Op>
  static V exchange(sycl::sub_group sg, Op op, V keep, V give, int offset) {
    if constexpr (std::is_same_v<V, float>) {
      return op(keep, sycl::permute_group_by_xor(sg, give, offset));
    } else {
      V out;
#pragma unroll
      for (int i = 0; i < static_cast<int>(sizeof(V) / sizeof(float)); ++i)
        out[i] = op(keep[i], sycl::permute_group_by_xor(sg, give[i], offset));
      return out;
    }
  }

  // The fp32 accumulator as the T operand A of the next product (same ownership: S's key
  // columns become P's reduction index).
  static void to_a(sycl::sub_group, const Acc &c, A &a) {
#pragma unroll
    for (int r = 0; r < kM; ++r)
      a[r] = static_cast<short>(sycl::bit_cast<std::uint16_t>(from_float<T>(c[r])));
  }

  // Rows [y, y + 8) x columns [x, x + 16) of a T surface = C with row r scaled by row r of
  // `scale`, rounded to T: one 2D block store (rows outside the surface are dropped).
  static void store_scaled(sycl::sub_group sg, const Acc &c, RowVec scale, const xe::Surface &s,
                           int x, int y) {
    A bits;
#pragma unroll
    for (int r = 0; r < kM; ++r)
      bits[r] = static_cast<short>(
          sycl::bit_cast<std::uint16_t>(from_float<T>(c[r] * row(sg, scale, r))));
    Builtins::store_rows8(sg, s, x, y, bits);
  }

  // p[0:8, 0:16] = C (row pitch `stride` floats).
  static void store(sycl::sub_group sg, const Acc &c, float *p, size_t stride) {
    const int j = lane(sg);
#pragma unroll
    for (int r = 0; r < kM; ++r) p[r * stride + j] = c[r];
  }

  static float exp2(float x) { return Builtins::exp2(x); }
};

}  // namespace xe2t::xmx
