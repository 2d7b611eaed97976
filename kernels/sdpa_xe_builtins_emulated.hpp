// The Xe primitives of sdpa_xe_builtins.hpp emulated with subgroup shuffles and plain,
// bounds-checked loads: the same values in the same lanes as the native built-ins (their
// documented semantics; tests/kernels/test_xe_builtins.py checks them element by element), on
// any device with 16-lane subgroups. Correct, not fast: one multiply-add is 16 x 8 broadcasts
// and FMAs per lane.
#pragma once

// Fragment loops stay rolled: nothing needs constant indices here, and unrolled, the CPU
// runtime's vectorizer (mode 0) took 2-3x the build time.
#define XE2T_XMX_FRAGMENT_LOOP _Pragma("unroll 1")

namespace xe2t::xe {

struct Builtins {
  static int lane(sycl::sub_group sg) { return static_cast<int>(sg.get_local_linear_id()); }

  // The element of `bytes` bytes at (column, row) of the surface, or 0 outside it.
  template <class U>
  static U element(const Surface &s, int column, int row) {
    if (row < 0 || row >= s.height || column < 0 || (column + 1) * sizeof(U) > size_t(s.width))
      return U{0};
    const char *p = static_cast<const char *>(s.base) + static_cast<size_t>(row) * s.pitch;
    return reinterpret_cast<const U *>(p)[column];
  }

  static Pair8 load_transposed(sycl::sub_group sg, const Surface &s, int x, int y) {
    Pair8 out;
    const int row = y + lane(sg);
#pragma unroll
    for (int p = 0; p < 8; ++p) out[p] = static_cast<int>(element<std::uint32_t>(s, x + p, row));
    return out;
  }

  static Pair8 load_vnni(sycl::sub_group sg, const Surface &s, int x, int y) {
    Pair8 out;
    const int column = x + lane(sg);
#pragma unroll
    for (int p = 0; p < 8; ++p)
      out[p] = static_cast<int>(
          element<std::uint16_t>(s, column, y + 2 * p) |
          static_cast<std::uint32_t>(element<std::uint16_t>(s, column, y + 2 * p + 1)) << 16);
    return out;
  }

  static Pair8 load_vnni8(sycl::sub_group sg, const Surface &s, int x, int y) {
    Pair8 out;
    const int column = x + lane(sg);
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      std::uint32_t dword = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i)
        dword |= static_cast<std::uint32_t>(element<std::uint8_t>(s, column, y + 4 * p + i))
                 << (8 * i);
      out[p] = static_cast<int>(dword);
    }
    return out;
  }

  static void store_rows8(sycl::sub_group sg, const Surface &s, int x, int y, Half8 v) {
    const int column = x + lane(sg);
    if (column < 0 || (column + 1) * 2 > s.width) return;
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      if (y + r < 0 || y + r >= s.height) continue;
      char *row = static_cast<char *>(const_cast<void *>(s.base)) +
                  static_cast<size_t>(y + r) * s.pitch;
      reinterpret_cast<std::uint16_t *>(row)[column] = static_cast<std::uint16_t>(v[r]);
    }
  }

  // A cache hint: nothing to emulate.
  template <int Rows>
  static void prefetch(sycl::sub_group, const Surface &, int, int) {}

  static Half8 load_local_tile(sycl::sub_group sg, const std::uint16_t *p) {
    Half8 out;
    const int j = lane(sg);
#pragma unroll
    for (int r = 0; r < 8; ++r) out[r] = static_cast<short>(p[r * kLanes + j]);
    return out;
  }

  // 16-bit operand bits -> fp32, exact.
  template <bool IsBf16>
  static float operand(std::uint16_t bits) {
    if constexpr (IsBf16)
      return sycl::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
    else
      return static_cast<float>(sycl::bit_cast<sycl::half>(bits));
  }

  // C[r][j] += sum_k A[r][k] B[k][j]: A[r][k] is lane k's a[r], B[k][j] this lane's half k % 2
  // of b[k / 2]; fp32 products and sums, as DPAS.
  template <bool IsBf16>
  static Frag8 dpas(sycl::sub_group sg, Frag8 c, Half8 a, Pair8 b) {
    for (int k = 0; k < kLanes; ++k) {
      const float bk =
          operand<IsBf16>(static_cast<std::uint16_t>(k % 2 ? b[k / 2] >> 16 : b[k / 2]));
#pragma unroll
      for (int r = 0; r < 8; ++r)
        c[r] = sycl::fma(
            operand<IsBf16>(static_cast<std::uint16_t>(sycl::select_from_group(sg, a[r], k))),
            bk, c[r]);
    }
    return c;
  }

  static float exp2(float x) { return sycl::exp2(x); }
};

}  // namespace xe2t::xe
