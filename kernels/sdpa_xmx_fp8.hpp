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
// the block: read again from the cache rather than kept, so the mainloop stays as it is). V's
// keys past kv_len read 0, as the block load's bounds check gives them (their P is 0, so their
// product is too); K's read the last row (their scores are masked, whatever they are). K/V rows
// are not prefetched (mainloop).
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

  using Short2 = std::int16_t __attribute__((ext_vector_type(2)));
  using Ushort2 = std::uint16_t __attribute__((ext_vector_type(2)));

  // Half h (0: low) of a dword: a 16-bit region of the register, no shift.
  static std::uint16_t half_of(std::uint32_t dword, int h) {
    return sycl::bit_cast<Ushort2>(dword)[h];
  }

  // The fp16 patterns of two consecutive elements' values / KV::kRebias (bytes 0 and 1 of
  // `two`), element 0 in the low half: fp8::half_bits's shifts done on 16-bit words, which IGC
  // writes straight into the halves of the operand's dword (e4m3: three word instructions and
  // one dword mask per pair; converted element by element, the hd128 decode's K loop took 8746
  // instructions for bmg instead of 2835: benchmarks/kv_isa.py).
  static std::uint32_t half_pair(std::uint16_t two) {
    const auto low_on_top = static_cast<std::int16_t>(static_cast<std::uint16_t>(two << 8));
    if constexpr (std::is_same_v<KV, fp8::e4m3>) {
      // Each byte on the top of a word, shifted right by one arithmetically: sign on bits 15
      // and 14, exponent and mantissa on 13..7; the mask clears bit 14 and the bits below 7.
      const Short2 h = {static_cast<std::int16_t>(low_on_top >> 1),
                        static_cast<std::int16_t>(static_cast<std::int16_t>(two) >> 1)};
      return sycl::bit_cast<std::uint32_t>(h) & 0xBF80BF80u;
    } else {
      const Short2 h = {low_on_top, static_cast<std::int16_t>(two & 0xFF00u)};
      return sycl::bit_cast<std::uint32_t>(h);
    }
  }

  // The B dword of two consecutive elements (bytes 0 and 1 of `two`), exact: their fp16
  // patterns, or for bf16 the top halves of their fp32 values (the hardware's widening of an
  // fp16, subnormals included), each written to its half of the dword by one shift or mask.
  static int pair(std::uint16_t two) {
    const std::uint32_t h = half_pair(two);
    if constexpr (std::is_same_v<T, half_t>) {
      return static_cast<int>(h);
    } else {
      const auto widened = [](std::uint32_t bits) {
        const auto x = sycl::bit_cast<half_t>(static_cast<std::uint16_t>(bits));
        return sycl::bit_cast<std::uint32_t>(static_cast<float>(x));
      };
      return static_cast<int>((widened(h) >> 16) | (widened(h >> 16) & 0xFFFF0000u));
    }
  }

  // B from 16 loaded elements per lane, four per dword (K: 16 head dims, V: 16 keys): pair p
  // is half p % 2 of dword p / 2.
  template <class Dwords>
  static void convert(B &b, const Dwords &dwords) {
#pragma unroll
    for (int p = 0; p < 8; ++p)
      b[p] = pair(half_of(static_cast<std::uint32_t>(dwords[p / 2]), p % 2));
  }

  // B[k][n] = K[key0 + n][d0 + k].
  static void load_kt(sycl::sub_group sg, B &b, const Rows<KV> &k, int key0, int d0) {
    // A key past kv_len reads the last row: its scores are masked whatever they are.
    const int key = sycl::min(key0 + static_cast<int>(sg.get_local_linear_id()), k.rows - 1);
    const auto row = *reinterpret_cast<const sycl::vec<std::uint32_t, 4> *>(
        k.base + static_cast<size_t>(key) * k.stride + d0);
    convert(b, row);
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

  // B[k][n] = V[key0 + k][c0 + n]: dword p of the 8-bit load holds keys 4p .. 4p + 3.
  static void load_v(sycl::sub_group sg, B &b, const Rows<KV> &v, int key0, int c0) {
    xe::Surface s;
    const int shift = aligned_surface(v, s);
    convert(b, Ops::Builtins::load_vnni8(sg, s, shift + c0, key0));
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
