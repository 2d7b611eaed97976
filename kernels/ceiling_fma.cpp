// Compute ceiling: independent FMA chains on vectors of the compute type, no memory traffic.
//
// XE2T_HALF selects sycl::half (1) or float (0) as the compute type; XE2T_CHAINS independent accumulators hide FMA latency;
// each work-item runs XE2T_ITERS rounds. FLOPs = global size * ITERS * CHAINS * VEC * 2.
#include <sycl/sycl.hpp>

namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

using ComputeT = std::conditional_t<XE2T_HALF, sycl::half, float>;
constexpr int kVec = XE2T_VEC;
constexpr int kChains = XE2T_CHAINS;
constexpr int kIters = XE2T_ITERS;
using VecT = sycl::vec<ComputeT, kVec>;

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void xe2t_ceiling_fma(ComputeT *out, ComputeT seed) {
  const size_t gid = syclext::this_work_item::get_nd_item<1>().get_global_id(0);
  VecT acc[kChains];
  const VecT mul(ComputeT(0.5f));  // fixed point 2*seed: values stay normal in fp16 too
  const VecT add(seed);
  for (int c = 0; c < kChains; ++c) acc[c] = VecT(seed + ComputeT(c));
  for (int i = 0; i < kIters; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) acc[c] = sycl::fma(acc[c], mul, add);
  }
  VecT total = acc[0];
  for (int c = 1; c < kChains; ++c) total += acc[c];
  ComputeT sum = 0;
  for (int l = 0; l < kVec; ++l) sum += total[l];
  out[gid] = sum;  // keeps every chain live
}
