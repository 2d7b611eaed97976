// Per-work-item tile operations of the SDPA mainloop: load a tile, multiply-accumulate,
// row reduce/broadcast, convert.
//
// This is the vector-lane implementation for CPUs (and any device without a matrix engine):
// a "subgroup" of SG_SIZE lanes is one sycl::vec<float, SG_SIZE> register, whose lanes span keys
// (S tiles) or head dims (Q, V and O rows). The Intel OpenCL CPU runtime maps such a vec to
// AVX registers when the kernel does NOT request a subgroup size: requesting one makes it
// packetize across work-items instead, which measured 2-3x slower on a GEMM micro-kernel.
// The matrix-engine family has tile ops of its own over DPAS fragments (sdpa_xmx_ops.hpp).
#pragma once

#include "sycl_device.hpp"

#include <cstdint>
#include <limits>
#include <utility>

namespace xe2t {

using half_t = sycl::half;
using bf16_t = sycl::ext::oneapi::bfloat16;

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

template <int W>
struct VecTileOps {
  static_assert(W == 4 || W == 8 || W == 16, "SG_SIZE (vector lanes) must be 4, 8 or 16");
  using vec = sycl::vec<float, W>;

  // Load W consecutive elements as fp32; fp16/bf16 data are converted here, once per load.
  static vec load(const float *p) { return *reinterpret_cast<const vec *>(p); }
  static vec load(const half_t *p) {
    return reinterpret_cast<const sycl::vec<half_t, W> *>(p)->template convert<float>();
  }
  static vec load(const bf16_t *p) {
    // bf16 is the upper half of an fp32: widening is an exact shift.
    const auto bits =
        reinterpret_cast<const sycl::vec<std::uint16_t, W> *>(p)->template convert<std::uint32_t>();
    return (bits << 16u).template as<vec>();
  }

  // Store W fp32 values, converting to the storage type (round to nearest even).
  static void store(float *p, vec x) { *reinterpret_cast<vec *>(p) = x; }
  static void store(half_t *p, vec x) {
    *reinterpret_cast<sycl::vec<half_t, W> *>(p) =
        x.template convert<half_t, sycl::rounding_mode::rte>();
  }
  static void store(bf16_t *p, vec x) {
    // Round to nearest even on the bits (the bfloat16 constructor crashes this runtime's
    // compiler); a NaN is kept a quiet NaN instead of being rounded into an infinity.
    using uvec = sycl::vec<std::uint32_t, W>;
    const uvec u = x.template as<uvec>();
    uvec r = (u + uvec(0x7FFFu) + ((u >> 16u) & uvec(1u))) >> 16u;
#pragma unroll
    for (int i = 0; i < W; ++i)
      if (sycl::isnan(x[i])) r[i] = (u[i] >> 16u) | 0x0040u;
    *reinterpret_cast<sycl::vec<std::uint16_t, W> *>(p) = r.template convert<std::uint16_t>();
  }

  // acc[r][c] += a[r] * b[c]: a column of scalars (broadcast) times a row of vectors.
  template <int R, int C>
  static void mma_outer(vec (&acc)[R][C], const float (&a)[R], const vec (&b)[C]) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const vec ar(a[r]);
#pragma unroll
      for (int c = 0; c < C; ++c) acc[r][c] = sycl::fma(ar, b[c], acc[r][c]);
    }
  }

  // acc[r][c] += a[r] * b[c] lane-wise: partial dot products, reduced later with reduce_sum.
  template <int R, int C>
  static void mma_dot(vec (&acc)[R][C], const vec (&a)[R], const vec (&b)[C]) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < C; ++c) acc[r][c] = sycl::fma(a[r], b[c], acc[r][c]);
  }

  // The clang vector type a sycl::vec<float, N> holds. Lane-wise work is written on it where
  // sycl::vec costs more: its swizzles (lo/hi/even/odd) compile to the same shuffles but cost
  // the front end a swizzle class template per use, most of a build's template instantiation.
  template <int N>
  using native = float __attribute__((ext_vector_type(N)));

  // Lane-wise max as a compare and select on the native vector type (one vmaxps):
  // sycl::fmax and sycl::max carry NaN rules that cost three extra instructions per call on
  // the CPU runtime, and sycl::select on a vec compiles to one scalar branch per lane.
  template <int N>
  static native<N> vmax(native<N> a, native<N> b) { return a > b ? a : b; }
  template <int N>
  static sycl::vec<float, N> vmax(sycl::vec<float, N> x, sycl::vec<float, N> y) {
    return sycl::bit_cast<sycl::vec<float, N>>(
        vmax<N>(sycl::bit_cast<native<N>>(x), sycl::bit_cast<native<N>>(y)));
  }
  static float smax(float x, float y) { return x > y ? x : y; }

  // Lanes First, First + Step, ... of a then b (as one vector of twice the lanes).
  template <int First, int Step, int N, std::size_t... I>
  static native<sizeof...(I)> pick(native<N> a, native<N> b, std::index_sequence<I...>) {
    return __builtin_shufflevector(a, b, (First + Step * static_cast<int>(I))...);
  }
  template <int N>
  static native<N / 2> low_half(native<N> x) {
    return pick<0, 1, N>(x, x, std::make_index_sequence<N / 2>());
  }
  template <int N>
  static native<N / 2> high_half(native<N> x) {
    return pick<N / 2, 1, N>(x, x, std::make_index_sequence<N / 2>());
  }

  // Row reductions over the lanes of one vector: log2(W) halvings (a lane extraction per lane
  // compiles to W scalar steps).
  template <int N>
  static float reduce_max(native<N> x) {
    if constexpr (N == 2) {
      return smax(x[0], x[1]);
    } else {
      return reduce_max<N / 2>(vmax<N / 2>(low_half<N>(x), high_half<N>(x)));
    }
  }
  static float reduce_max(vec x) { return reduce_max<W>(sycl::bit_cast<native<W>>(x)); }
  template <int N>
  static float reduce_sum(native<N> x) {
    if constexpr (N == 2) {
      return x[0] + x[1];
    } else {
      return reduce_sum<N / 2>(low_half<N>(x) + high_half<N>(x));
    }
  }
  static float reduce_sum(vec x) { return reduce_sum<W>(sycl::bit_cast<native<W>>(x)); }

  // The even lanes of x then of y, and the odd lanes of x then of y: one round of the
  // transposes below.
  static vec evens(vec x, vec y) {
    return sycl::bit_cast<vec>(pick<0, 2, W>(sycl::bit_cast<native<W>>(x),
                                             sycl::bit_cast<native<W>>(y),
                                             std::make_index_sequence<W>()));
  }
  static vec odds(vec x, vec y) {
    return sycl::bit_cast<vec>(pick<1, 2, W>(sycl::bit_cast<native<W>>(x),
                                             sycl::bit_cast<native<W>>(y),
                                             std::make_index_sequence<W>()));
  }

  // Lane i of the result = the lane sum of a[i]: a transposed reduction, log2(W) levels of
  // even/odd pair additions instead of W separate horizontal sums (a is overwritten).
  static vec reduce_sum_transposed(vec (&a)[W]) {
#pragma unroll
    for (int n = W; n > 1; n /= 2)
#pragma unroll
      for (int i = 0; i < n / 2; ++i)
        a[i] = evens(a[2 * i], a[2 * i + 1]) + odds(a[2 * i], a[2 * i + 1]);
    return a[0];
  }

  // Transposes a W x W tile held as W row vectors (row i becomes column i) in log2(W) rounds
  // of even/odd interleaves: W vector shuffles per round instead of W * W scalar stores.
  // Each round moves the lowest column-index bit to the top of the row index and the lowest
  // row-index bit to the top of the column index; after log2(W) rounds the indices swapped.
  static void transpose(vec (&a)[W]) {
#pragma unroll
    for (int n = 1; n < W; n *= 2) {
      vec b[W];
#pragma unroll
      for (int i = 0; i < W / 2; ++i) {
        b[i] = evens(a[2 * i], a[2 * i + 1]);
        b[i + W / 2] = odds(a[2 * i], a[2 * i + 1]);
      }
#pragma unroll
      for (int i = 0; i < W; ++i) a[i] = b[i];
    }
  }

  // 2^x = 2^n * 2^f with n = round(x), |f| <= 1/2: 2^f by a degree-5 minimax polynomial
  // (relative error 8e-8, 2.5e-7 as evaluated in fp32) in FMAs. sycl::exp2 costs ~25% of the
  // whole prefill on the CPU runtime, and a float-to-int vec conversion is per-lane code there
  // too (measured: prefill 1.3x slower), so n is rounded with the 1.5 * 2^23 magic-number
  // trick, whose low mantissa bits are n as an integer. Inputs below -126 (including -inf,
  // masked scores) give exactly 0; the mainloop only passes x <= 0.
  static vec exp2(vec x) {
    using ivec = sycl::vec<int, W>;
    constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
    const vec xc = vmax(x, vec(-127.0f));
    const vec t = xc + vec(kMagic);
    const vec f = xc - (t - vec(kMagic));
    vec p(1.3275319e-3f);
    p = sycl::fma(p, f, vec(9.6751445e-3f));
    p = sycl::fma(p, f, vec(5.5507135e-2f));
    p = sycl::fma(p, f, vec(2.4022128e-1f));
    p = sycl::fma(p, f, vec(6.9314697e-1f));
    p = sycl::fma(p, f, vec(1.0000001f));
    const ivec bits = (t.template as<ivec>() - ivec(0x4B400000 - 127)) << 23;
    return p * bits.template as<vec>();
  }
};

}  // namespace xe2t
