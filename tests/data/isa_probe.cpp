// Kernels with known Xe2 ISA for tests/kernels/test_isa.py, compiled to SPIR-V once and checked in
// (tests/data/isa_probe_*.spv; how: see tests/kernels/test_isa.py's module docstring).
//  - xe2t_isa_block2d: one 2D block prefetch, one plain, one VNNI-transform and one transposed
//    2D block load, two DPAS and one 2D block store (Intel's 2D block built-ins, subgroup 16);
//  - xe2t_isa_local: work-group local memory, one work-group barrier, a global load, a global
//    store and a global atomic add;
//  - xe2t_isa_spill: 192 floats live per work-item across a loop: spills with 128 registers;
//  - xe2t_isa_spill256: the same with grf_size<256> (a module of its own, 256 registers).
#include <sycl/sycl.hpp>

namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;
using short8 = short __attribute__((ext_vector_type(8)));
using int8v = int __attribute__((ext_vector_type(8)));
using float8 = float __attribute__((ext_vector_type(8)));
using int2v = int __attribute__((ext_vector_type(2)));
#define GLOBAL __attribute__((opencl_global))
#define PRIV __attribute__((opencl_private))

#ifdef __SYCL_DEVICE_ONLY__
SYCL_EXTERNAL void intel_sub_group_2d_block_read_16b_8r16x1c(GLOBAL void *, int, int, int, int2v, PRIV unsigned short *);
SYCL_EXTERNAL void intel_sub_group_2d_block_read_transform_16b_16r16x1c(GLOBAL void *, int, int, int, int2v, PRIV unsigned int *);
SYCL_EXTERNAL void intel_sub_group_2d_block_read_transpose_32b_16r8x1c(GLOBAL void *, int, int, int, int2v, PRIV unsigned int *);
SYCL_EXTERNAL void intel_sub_group_2d_block_prefetch_16b_16r16x1c(GLOBAL void *, int, int, int, int2v);
SYCL_EXTERNAL void intel_sub_group_2d_block_write_32b_8r16x1c(GLOBAL void *, int, int, int, int2v, PRIV unsigned int *);
SYCL_EXTERNAL float8 intel_sub_group_f16_f16_matrix_mad_k16(short8, int8v, float8);
#endif

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))
void xe2t_isa_block2d(const sycl::half *a, const sycl::half *b, float *c, int n) {
#ifdef __SYCL_DEVICE_ONLY__
  short8 va; int8v vb, vk; float8 vc = 0;
  auto ga = (GLOBAL void *)(a); auto gb = (GLOBAL void *)(b);
  intel_sub_group_2d_block_prefetch_16b_16r16x1c(gb, n * 2, n, n * 2, int2v{0, 16});
  intel_sub_group_2d_block_read_16b_8r16x1c(ga, n * 2, n, n * 2, int2v{0, 0}, (PRIV unsigned short *)&va);
  intel_sub_group_2d_block_read_transform_16b_16r16x1c(gb, n * 2, n, n * 2, int2v{0, 0}, (PRIV unsigned int *)&vb);
  intel_sub_group_2d_block_read_transpose_32b_16r8x1c(gb, n * 2, n, n * 2, int2v{0, 0}, (PRIV unsigned int *)&vk);
  vc = intel_sub_group_f16_f16_matrix_mad_k16(va, vb, vc);
  vc = intel_sub_group_f16_f16_matrix_mad_k16(va, vk, vc);
  intel_sub_group_2d_block_write_32b_8r16x1c((GLOBAL void *)c, n * 4, n, n * 4, int2v{0, 0}, (PRIV unsigned int *)&vc);
#endif
}

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void xe2t_isa_local(const float *x, float *y, int *count) {
  static syclexp::work_group_static<float[64]> f;
  const auto it = syclext::this_work_item::get_nd_item<1>();
  const size_t i = it.get_local_id(0);
  f[i] = x[it.get_global_id(0)];
  sycl::group_barrier(it.get_group());
  y[it.get_global_id(0)] = f[63 - i];
  sycl::atomic_ref<int, sycl::memory_order::relaxed, sycl::memory_scope::device,
                   sycl::access::address_space::global_space>(*count).fetch_add(1);
}

#define XE2T_SPILL_BODY                                                          \
  const size_t g = syclext::this_work_item::get_nd_item<1>().get_global_id(0);   \
  float acc[192];                                                                \
  _Pragma("unroll") for (int i = 0; i < 192; ++i) acc[i] = x[g * 192 + i];       \
  for (int k = 0; k < k_len; ++k) {                                              \
    const float a = x[k];                                                        \
    _Pragma("unroll") for (int i = 0; i < 192; ++i)                              \
      acc[i] = sycl::fma(acc[i], a, acc[(i + 1) % 192]);                         \
  }                                                                              \
  float sum = 0.0f;                                                              \
  _Pragma("unroll") for (int i = 0; i < 192; ++i) sum += acc[i] * acc[191 - i];  \
  y[g] = sum;

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void xe2t_isa_spill(const float *x, float *y, int k_len) { XE2T_SPILL_BODY }

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::intel::experimental::grf_size<256>))
void xe2t_isa_spill256(const float *x, float *y, int k_len) { XE2T_SPILL_BODY }
