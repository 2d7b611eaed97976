// OCP FP8 K/V elements (one byte: e4m3 = float8_e4m3fn, e5m2 = float8_e5m2) and their vector-lane
// loader: W bytes -> W fp32 lanes by integer shifts into fp16 bit patterns, then the tile ops'
// fp16 widening (one vcvtph2ps on AVX-512), with no per-lane branches or table lookups.
//   e5m2 is the top byte of an fp16: bits << 8, exact, infinities and NaNs included.
//   e4m3 shifted by 7 into an fp16 (sign to bit 15, exponent and mantissa to bits 7..13) is the
//   value times 2^-8 (its exponent bias is 7, fp16's 15), subnormals included: one fp32
//   multiply by 256 restores it. e4m3fn has no infinity; its NaN (S.1111.111) reads as +-480.
#pragma once

#include <sycl/sycl.hpp>

#include <cstdint>

#include "sdpa_tile_ops.hpp"

namespace xe2t::fp8 {

struct e4m3 {
  std::uint8_t bits;
};
struct e5m2 {
  std::uint8_t bits;
};

// fp16 bit patterns of W FP8 elements: the value itself (e5m2) or the value times 2^-8 (e4m3).
template <int W>
sycl::vec<std::uint16_t, W> half_bits(const e5m2 *p) {
  const auto b = reinterpret_cast<const sycl::vec<std::uint8_t, W> *>(p)->template convert<std::uint16_t>();
  return b << static_cast<std::uint16_t>(8);
}
template <int W>
sycl::vec<std::uint16_t, W> half_bits(const e4m3 *p) {
  using u16 = sycl::vec<std::uint16_t, W>;
  const u16 b = reinterpret_cast<const sycl::vec<std::uint8_t, W> *>(p)->template convert<std::uint16_t>();
  return ((b & u16(0x80)) << static_cast<std::uint16_t>(8)) |
         ((b & u16(0x7F)) << static_cast<std::uint16_t>(7));
}

// One FP8 element as fp32, exactly (the same shifts, one lane at a time).
inline float to_float(e5m2 x) {
  return static_cast<float>(sycl::bit_cast<half_t>(static_cast<std::uint16_t>(x.bits << 8)));
}
inline float to_float(e4m3 x) {
  const auto bits = static_cast<std::uint16_t>(((x.bits & 0x80) << 8) | ((x.bits & 0x7F) << 7));
  return static_cast<float>(sycl::bit_cast<half_t>(bits)) * 256.0f;  // 2^(15 - 7)
}

// The K/V loader of the vector-lane mainloop for FP8 elements (Operands<KvVariant<...>>).
template <int W>
struct VecLoads {
  using vec = sycl::vec<float, W>;
  static constexpr float kE4m3Rebias = 256.0f;  // 2^(15 - 7)

  static vec widen(sycl::vec<std::uint16_t, W> bits) {
    return VecTileOps<W>::load(reinterpret_cast<const half_t *>(&bits));
  }
  static vec load(const e5m2 *p) { return widen(half_bits<W>(p)); }
  static vec load(const e4m3 *p) { return widen(half_bits<W>(p)) * vec(kE4m3Rebias); }
};

}  // namespace xe2t::fp8
