// The Xe primitives of sdpa_xe_builtins.hpp on an Intel GPU: OpenCL extension built-ins that
// IGC lowers to load_block2d / store_block2d messages and dpas.8x8 (ISA checked by
// tests/kernels/test_xe2_isa.py).
#pragma once

// Fragment loops are fully unrolled: the per-lane vectors of a subgroup's fragments live in
// registers only when every index into their arrays is a constant.
#define XE2T_XMX_FRAGMENT_LOOP _Pragma("unroll")

#ifdef __SYCL_DEVICE_ONLY__
#define XE2T_GLOBAL __attribute__((opencl_global))
#define XE2T_LOCAL __attribute__((opencl_local))
#define XE2T_PRIVATE __attribute__((opencl_private))
// cl_intel_subgroup_2d_block_io: width and pitch in bytes, height in rows, coord = (x in
// elements, y in rows); 16b = 16-bit elements, 8r16x1c = 8 rows x 16 columns, one block.
SYCL_EXTERNAL void intel_sub_group_2d_block_read_transpose_32b_16r8x1c(
    XE2T_GLOBAL void *, int, int, int, xe2t::xe::Int2, XE2T_PRIVATE unsigned int *);
SYCL_EXTERNAL void intel_sub_group_2d_block_read_transform_16b_16r16x1c(
    XE2T_GLOBAL void *, int, int, int, xe2t::xe::Int2, XE2T_PRIVATE unsigned int *);
SYCL_EXTERNAL void intel_sub_group_2d_block_read_transform_8b_32r16x1c(
    XE2T_GLOBAL void *, int, int, int, xe2t::xe::Int2, XE2T_PRIVATE unsigned int *);
SYCL_EXTERNAL void intel_sub_group_2d_block_prefetch_16b_16r16x2c(XE2T_GLOBAL void *, int, int,
                                                                 int, xe2t::xe::Int2);
SYCL_EXTERNAL void intel_sub_group_2d_block_prefetch_16b_32r16x2c(XE2T_GLOBAL void *, int, int,
                                                                 int, xe2t::xe::Int2);
SYCL_EXTERNAL void intel_sub_group_2d_block_write_16b_8r16x1c(XE2T_GLOBAL void *, int, int, int,
                                                             xe2t::xe::Int2,
                                                             XE2T_PRIVATE unsigned short *);
// cl_intel_subgroup_matrix_multiply_accumulate: 8 x 16 x 16, fp32 accumulators.
SYCL_EXTERNAL xe2t::xe::Frag8 intel_sub_group_f16_f16_matrix_mad_k16(xe2t::xe::Half8,
                                                                     xe2t::xe::Pair8,
                                                                     xe2t::xe::Frag8);
SYCL_EXTERNAL xe2t::xe::Frag8 intel_sub_group_bf16_bf16_matrix_mad_k16(xe2t::xe::Half8,
                                                                       xe2t::xe::Pair8,
                                                                       xe2t::xe::Frag8);
// cl_intel_subgroup_local_block_io: lane j gets p[j + 16 i], i < 8.
SYCL_EXTERNAL xe2t::xe::Half8 intel_sub_group_block_read_us8(const XE2T_LOCAL unsigned short *);
#endif

namespace xe2t::xe {

struct Builtins {
#ifdef __SYCL_DEVICE_ONLY__
  static XE2T_GLOBAL void *global(const void *p) {
    return (XE2T_GLOBAL void *)(const_cast<void *>(p));
  }
#endif

  // 16 rows x 8 dwords at (x dwords, y rows), transposed: lane n holds the 8 dwords of row
  // y + n (16 consecutive 16-bit elements: K^T as a B operand).
  static Pair8 load_transposed(sycl::sub_group, const Surface &s, int x, int y) {
    Pair8 out;
#ifdef __SYCL_DEVICE_ONLY__
    intel_sub_group_2d_block_read_transpose_32b_16r8x1c(global(s.base), s.width, s.height,
                                                       s.pitch, Int2{x, y},
                                                       (XE2T_PRIVATE unsigned int *)&out);
#endif
    return out;
  }

  // 16 rows x 16 16-bit columns at (x, y), VNNI-transformed: lane n holds column x + n,
  // rows paired (V as a B operand).
  static Pair8 load_vnni(sycl::sub_group, const Surface &s, int x, int y) {
    Pair8 out;
#ifdef __SYCL_DEVICE_ONLY__
    intel_sub_group_2d_block_read_transform_16b_16r16x1c(global(s.base), s.width, s.height,
                                                        s.pitch, Int2{x, y},
                                                        (XE2T_PRIVATE unsigned int *)&out);
#endif
    return out;
  }

  // 32 rows x 16 8-bit columns at (x, y), VNNI-transformed: lane n holds column x + n, dword
  // p its rows y + 4p .. y + 4p + 3 (byte i = row y + 4p + i); FP8 V as a B operand's source.
  static Pair8 load_vnni8(sycl::sub_group, const Surface &s, int x, int y) {
    Pair8 out;
#ifdef __SYCL_DEVICE_ONLY__
    intel_sub_group_2d_block_read_transform_8b_32r16x1c(global(s.base), s.width, s.height,
                                                       s.pitch, Int2{x, y},
                                                       (XE2T_PRIVATE unsigned int *)&out);
#endif
    return out;
  }

  // 8 rows x 16 16-bit columns at (x, y) from lane j's column j; writes outside the surface
  // are dropped.
  static void store_rows8(sycl::sub_group, const Surface &s, int x, int y,
                          [[maybe_unused]] Half8 v) {
#ifdef __SYCL_DEVICE_ONLY__
    intel_sub_group_2d_block_write_16b_8r16x1c(global(s.base), s.width, s.height, s.pitch,
                                              Int2{x, y}, (XE2T_PRIVATE unsigned short *)&v);
#endif
  }

  // Rows x 32 16-bit columns at (x, y) towards the caches (Rows = 16 or 32).
  template <int Rows>
  static void prefetch(sycl::sub_group, const Surface &s, int x, int y) {
    static_assert(Rows == 16 || Rows == 32, "2D block prefetches of 16 or 32 rows");
#ifdef __SYCL_DEVICE_ONLY__
    if constexpr (Rows == 32)
      intel_sub_group_2d_block_prefetch_16b_32r16x2c(global(s.base), s.width, s.height, s.pitch,
                                                     Int2{x, y});
    else
      intel_sub_group_2d_block_prefetch_16b_16r16x2c(global(s.base), s.width, s.height, s.pitch,
                                                     Int2{x, y});
#endif
  }

  // An 8 x 16 tile of 16-bit elements stored contiguously (row-major, pitch 16) in local
  // memory: lane j holds column j.
  static Half8 load_local_tile(sycl::sub_group, [[maybe_unused]] const std::uint16_t *p) {
#ifdef __SYCL_DEVICE_ONLY__
    return intel_sub_group_block_read_us8((const XE2T_LOCAL unsigned short *)p);
#else
    return Half8{};  // host pass: kernels run on the device only
#endif
  }

  // c + a x b; IsBf16 picks the operand type (fp16 otherwise).
  template <bool IsBf16>
  static Frag8 dpas(sycl::sub_group, Frag8 c, [[maybe_unused]] Half8 a,
                    [[maybe_unused]] Pair8 b) {
#ifdef __SYCL_DEVICE_ONLY__
    if constexpr (IsBf16)
      return intel_sub_group_bf16_bf16_matrix_mad_k16(a, b, c);
    else
      return intel_sub_group_f16_f16_matrix_mad_k16(a, b, c);
#else
    return c;  // host pass
#endif
  }

  static float exp2(float x) { return sycl::native::exp2(x); }
};

}  // namespace xe2t::xe
