// The vocabulary of the xmx mainloop and its tile ops: the DPAS fragment shape, a view of a
// row-major K or V slice in global memory, and the fp32 -> fp16/bf16 element conversion.
//
// Fragment ownership (the Xe DPAS register layout, SIMD16): an 8 x 16 tile (M = 8 rows, 16
// columns) is held by the 16 lanes of a subgroup, lane j holding column j of all 8 rows; a
// 16 x 16 B operand likewise, lane j holding column j of all 16 rows (K dimension), in pairs.
#pragma once

#include "sycl_device.hpp"

#include <cstdint>

#include "sdpa_tile_ops.hpp"

namespace xe2t::xmx {

inline constexpr int kM = 8;   // DPAS rows (M)
inline constexpr int kN = 16;  // DPAS columns (N) = subgroup size
inline constexpr int kK = 16;  // DPAS reduction depth (K) for fp16/bf16

// Rows [0, rows) x columns [0, cols) of a row-major matrix with a row pitch of `stride`
// elements (K or V of one (batch, KV head): cols = D, stride = heads_kv * D). Elements outside
// read as 0.
template <class T>
struct Rows {
  const T *base;
  size_t stride;
  int rows;
  int cols;
};

// fp32 -> T, round to nearest even. bf16 rounds on the bits (the bfloat16 constructor crashes
// the CPU runtime's compiler); a NaN stays a quiet NaN instead of rounding into an infinity.
template <class T>
T from_float(float x);
template <>
inline half_t from_float<half_t>(float x) {
  return static_cast<half_t>(x);
}
template <>
inline bf16_t from_float<bf16_t>(float x) {
  const std::uint32_t u = sycl::bit_cast<std::uint32_t>(x);
  const std::uint32_t r =
      sycl::isnan(x) ? (u >> 16) | 0x0040u : (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return sycl::bit_cast<bf16_t>(static_cast<std::uint16_t>(r));
}

}  // namespace xe2t::xmx
