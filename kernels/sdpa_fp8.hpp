// OCP FP8 K/V elements (one byte: e4m3 = float8_e4m3fn, e5m2 = float8_e5m2), their conversion by
// integer shifts into fp16 bit patterns (no per-lane branches or table lookups) and the
// vector-lane loader: W bytes -> W fp16 patterns -> W fp32 lanes (one vcvtph2ps on AVX-512).
//   e5m2 is the top byte of an fp16: bits << 8, exact, infinities and NaNs included.
//   e4m3 shifted by 7 into an fp16 (sign to bit 15, exponent and mantissa to bits 7..13) is the
//   value times 2^-8 (its exponent bias is 7, fp16's 15), subnormals included. The factor
//   kRebias = 2^8 is not applied per element: the kernels fold it into the K and V scales
//   (sdpa_kv_variant.hpp). e4m3fn has no infinity; its NaN (S.1111.111) reads as +-480.
#pragma once

#include "sycl_device.hpp"

#include <cstdint>

#include "sdpa_tile_ops.hpp"

namespace xe2t::fp8 {

struct e4m3 {
  std::uint8_t bits;
  static constexpr float kRebias = 256.0f;  // 2^(15 - 7)
};
struct e5m2 {
  std::uint8_t bits;
  static constexpr float kRebias = 1.0f;
};

// The fp16 bit pattern of one FP8 element's value / KV::kRebias.
inline std::uint16_t half_bits(e5m2 x) { return static_cast<std::uint16_t>(x.bits << 8); }
inline std::uint16_t half_bits(e4m3 x) {
  return static_cast<std::uint16_t>(((x.bits & 0x80) << 8) | ((x.bits & 0x7F) << 7));
}

// The same for W consecutive elements.
template <int W>
sycl::vec<std::uint16_t, W> half_bits(const e5m2 *p) {
  using u8 = sycl::vec<std::uint8_t, W>;
  const auto b = reinterpret_cast<const u8 *>(p)->template convert<std::uint16_t>();
  return b << static_cast<std::uint16_t>(8);
}
template <int W>
sycl::vec<std::uint16_t, W> half_bits(const e4m3 *p) {
  // Sign-extended to 16 bits and shifted by 7, the sign lands on bits 15 and 14 and exponent and
  // mantissa on bits 7..13; clearing bit 14 leaves the fp16 pattern. Three vector operations
  // (vpmovsxbw, vpsllw, vpand) where masking the sign and the rest apart took five, measured
  // as the difference between e4m3 and e5m2 (one shift) decode times.
  using s8 = sycl::vec<std::int8_t, W>;
  using s16 = sycl::vec<std::int16_t, W>;
  const s16 b = reinterpret_cast<const s8 *>(p)->template convert<std::int16_t>();
  return ((b << static_cast<std::int16_t>(7)) & s16(static_cast<std::int16_t>(0xBFFF)))
      .template as<sycl::vec<std::uint16_t, W>>();
}

// The K/V loader of the vector-lane mainloop for FP8 elements (Operands<KvVariant<...>>):
// values / KV::kRebias as fp32.
template <int W>
struct VecLoads {
  using vec = sycl::vec<float, W>;

  template <class KV>
  static vec load(const KV *p) {
    return half_bits<W>(p).template as<sycl::vec<half_t, W>>().template convert<float>();
  }
};

}  // namespace xe2t::fp8
