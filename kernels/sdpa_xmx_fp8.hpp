// FP8 K/V loaders of the xmx family, included by sdpa_xmx_config.hpp only for builds that define
// XE2T_KV (1 = e4m3, 2 = e5m2): the MHA/GQA kernels never see this file. Xe2's DPAS takes no FP8
// operand, so each fragment is converted to Q's element type in registers after the load, by
// bit shifts into fp16 (sdpa_fp8.hpp), exact for e4m3 and e5m2 in fp16 and bf16 (e4m3 as
// value / 2^8, the factor folded into the scales).
//
// The loads are plain per-lane loads (the Xe built-ins' 2D block messages move 16- and 32-bit
// elements in the layouts the 16-bit tile ops use): K^T, lane n reads the 16 bytes of key
// key0 + n at head dims [d0, d0 + 16) in one 16-byte load; V, lane n reads column c0 + n of 16
// keys, each row's 16 lanes one contiguous 16-byte access. Keys past kv_len read 0, as the
// block loads' bounds check gives them. K/V rows are not prefetched (mainloop).
#pragma once

#include <sycl/sycl.hpp>

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

  // B[k][n] = V[key0 + k][c0 + n].
  static void load_v(sycl::sub_group sg, B &b, const Rows<KV> &v, int key0, int c0) {
    const KV *column = v.base + c0 + static_cast<int>(sg.get_local_linear_id());
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      const int r0 = key0 + 2 * p;
      const std::uint8_t lo = r0 < v.rows ? column[static_cast<size_t>(r0) * v.stride].bits : 0;
      const std::uint8_t hi =
          r0 + 1 < v.rows ? column[static_cast<size_t>(r0 + 1) * v.stride].bits : 0;
      b[p] = static_cast<int>(bits(lo) | bits(hi) << 16);
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
