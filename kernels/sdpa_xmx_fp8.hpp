// FP8 K/V loaders of the xmx family, included by sdpa_xmx_config.hpp only for builds that define
// XE2T_KV (1 = e4m3, 2 = e5m2): the MHA/GQA kernels never see this file. Xe2's DPAS takes no FP8
// operand, so each fragment is converted to Q's element type in registers after the load, by
// bit shifts into fp16 (sdpa_fp8.hpp), exact for e4m3 and e5m2 in fp16 and bf16 (e4m3 as
// value / 2^8, the factor folded into the scales).
//
// K^T: lane n reads the 16 bytes of key key0 + n at head dims [d0, d0 + 16) in one 16-byte
// per-lane load (the 2D block messages transpose 32-bit elements only). V: one 8-bit
// VNNI-transformed 2D block load of 32 keys x 16 columns (lane n: column c0 + n, four keys per
// dword), of which the fragment takes its 16 keys (the other 16 are the next fragment's or past
// the block: read again from the cache rather than kept, so the mainloop stays as it is). Keys
// past kv_len read 0, as the block loads' bounds check gives them. K/V rows are not prefetched
// (mainloop).
#pragma once

#include "sycl_device.hpp"

#include <cstdint>

#include "sdpa_fp8.hpp"
#include "sdpa_xmx_mainloop.hpp"

namespace xe2t::xmx {

template <class Ops, class KV>
struct Fp8Loads {
  using T = typename Ops::Elem;
  using B = typename Ops::B;

  // The T bits of one FP8 element's value / KV::kRebias, exact: the fp16 pattern itself, or
  // for bf16 the top half of its fp32 value.
  static std::uint32_t bits(std::uint8_t x) {
    const std::uint16_t h = fp8::half_bits(KV{x});
    if constexpr (std::is_same_v<T, half_t>) {
      return h;
    } else {
      return sycl::bit_cast<std::uint32_t>(static_cast<float>(sycl::bit_cast<half_t>(h))) >> 16;
    }
  }

  // B[k][n] = K[key0 + n][d0 + k].
  static void load_kt(sycl::sub_group sg, B &b, const Rows<KV> &k, int key0, int d0) {
    const int key = key0 + static_cast<int>(sg.get_local_linear_id());
    sycl::vec<std::uint8_t, 16> row(0);
    if (key < k.rows)
      row = *reinterpret_cast<const sycl::vec<std::uint8_t, 16> *>(
          k.base + static_cast<size_t>(key) * k.stride + d0);
#pragma unroll
    for (int p = 0; p < 8; ++p)
      b[p] = static_cast<int>(bits(row[2 * p]) | bits(row[2 * p + 1]) << 16);
  }

  // The rows as a surface of bytes whose base is 64-byte aligned, as the 2D block messages need
  // it (a KV head's rows start at hkv * Dv bytes, e.g. 96): the base moves down to the aligned
  // address and the columns right by as many bytes. Returns that column offset.
  static int aligned_surface(const Rows<KV> &m, xe::Surface &s) {
    const auto address = reinterpret_cast<std::uintptr_t>(m.base);
    const int shift = static_cast<int>(address % 64);
    s = {reinterpret_cast<const void *>(address - shift), m.cols + shift, m.rows,
         static_cast<int>(m.stride)};
    return shift;
  }

  // B[k][n] = V[key0 + k][c0 + n]: dword p of the 8-bit load holds keys 4p .. 4p + 3, so
  // B's pair p (keys 2p, 2p + 1) is half p % 2 of dword p / 2.
  static void load_v(sycl::sub_group sg, B &b, const Rows<KV> &v, int key0, int c0) {
    xe::Surface s;
    const int shift = aligned_surface(v, s);
    const xe::Pair8 keys = Ops::Builtins::load_vnni8(sg, s, shift + c0, key0);
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      const auto dword = static_cast<std::uint32_t>(keys[p / 2]) >> (p % 2 * 16);
      b[p] = static_cast<int>(bits(static_cast<std::uint8_t>(dword)) |
                              bits(static_cast<std::uint8_t>(dword >> 8)) << 16);
    }
  }
};

template <class Ops>
struct KvLoadsOf<Ops, fp8::e4m3> {
  using type = Fp8Loads<Ops, fp8::e4m3>;
};
template <class Ops>
struct KvLoadsOf<Ops, fp8::e5m2> {
  using type = Fp8Loads<Ops, fp8::e5m2>;
};

}  // namespace xe2t::xmx
