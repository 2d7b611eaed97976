// Kernels with known SPIR-V features for tests/kernels/test_spirv.py: a joint_matrix kernel on 16-lane
// subgroups with exactly two multiply-adds (XE2T_GRF256=1 adds grf_size<256>), a plain kernel
// with 1328 bytes of work-group static memory (300 floats + 64 halves), and a kernel that keeps
// 192 floats live per work-item, more than 128 registers hold at SIMD8 (a spill for ocloc).
// XE2T_BROKEN=1 makes the build fail.
#include <sycl/sycl.hpp>

namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;
namespace mx = syclexp::matrix;

#if XE2T_BROKEN
#error "XE2T_BROKEN=1: this build fails on purpose"
#endif

// One property per macro: two inside one SYCL_EXT_ONEAPI_FUNCTION_PROPERTY drop the kernel.
#if XE2T_GRF256
#define XE2T_GRF SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::intel::experimental::grf_size<256>))
#else
#define XE2T_GRF
#endif

template <typename T>
static auto global_ptr(T *p) {
  return sycl::address_space_cast<sycl::access::address_space::global_space,
                                  sycl::access::decorated::no>(p);
}

// C (8 x 16) = A (8 x 32, row-major) x B (32 x 16, row-major): K in two 16-deep steps.
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>)) XE2T_GRF
void xe2t_probe_mma(const sycl::half *a, const sycl::half *b, float *c) {
  const auto sg = syclext::this_work_item::get_sub_group();
  mx::joint_matrix<sycl::sub_group, sycl::half, mx::use::a, 8, 16, mx::layout::row_major> ma0, ma1;
  mx::joint_matrix<sycl::sub_group, sycl::half, mx::use::b, 16, 16, mx::layout::row_major> mb0, mb1;
  mx::joint_matrix<sycl::sub_group, float, mx::use::accumulator, 8, 16> mc;
  mx::joint_matrix_fill(sg, mc, 0.0f);
  mx::joint_matrix_load(sg, ma0, global_ptr(a), 32);
  mx::joint_matrix_load(sg, mb0, global_ptr(b), 16);
  mx::joint_matrix_mad(sg, mc, ma0, mb0, mc);
  mx::joint_matrix_load(sg, ma1, global_ptr(a + 16), 32);
  mx::joint_matrix_load(sg, mb1, global_ptr(b + 16 * 16), 16);
  mx::joint_matrix_mad(sg, mc, ma1, mb1, mc);
  mx::joint_matrix_store(sg, mc, global_ptr(c), 16, mx::layout::row_major);
}

// Reverses each work-group's 64 elements through local memory.
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void xe2t_probe_local(const float *x, float *y) {
  static syclexp::work_group_static<float[300]> f;
  static syclexp::work_group_static<sycl::half[64]> h;
  const auto it = syclext::this_work_item::get_nd_item<1>();
  const size_t i = it.get_local_id(0);
  f[i] = x[it.get_global_id(0)];
  h[i] = static_cast<sycl::half>(f[i]);
  sycl::group_barrier(it.get_group());
  y[it.get_global_id(0)] = f[63 - i] + static_cast<float>(h[63 - i]);
}

// 192 accumulators, each step reading its neighbour: all stay live across the k loop.
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void xe2t_probe_spill(const float *x, float *y, int k_len) {
  const size_t g = syclext::this_work_item::get_nd_item<1>().get_global_id(0);
  float acc[192];
#pragma unroll
  for (int i = 0; i < 192; ++i) acc[i] = x[g * 192 + i];
  for (int k = 0; k < k_len; ++k) {
    const float a = x[k];
#pragma unroll
    for (int i = 0; i < 192; ++i) acc[i] = sycl::fma(acc[i], a, acc[(i + 1) % 192]);
  }
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 192; ++i) sum += acc[i] * acc[191 - i];
  y[g] = sum;
}
