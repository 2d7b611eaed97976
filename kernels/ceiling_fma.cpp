// Compute ceiling: independent FMA chains on vectors of the compute type, no memory traffic.
//
// One program holds every launch shape of harness/_ceilings.py's FMA_VARIANTS, in fp32 and fp16
// (one build instead of one per shape: the build is the ceilings' largest cost). Kernel
// xe2t_ceiling_fma_<fp32|fp16>_v<VEC>_c<CHAINS>_i<ITERS>: CHAINS independent accumulators of
// sycl::vec<T, VEC> hide FMA latency; each work-item runs ITERS rounds.
// FLOPs = global size * ITERS * CHAINS * VEC * 2.
#include "sycl_device.hpp"

namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

template <typename ComputeT, int kVec, int kChains, int kIters>
void fma_chains(ComputeT *out, ComputeT seed) {
  using VecT = sycl::vec<ComputeT, kVec>;
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

#define XE2T_FMA_KERNEL(NAME, T, VEC, CHAINS, ITERS)                                 \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))        \
  void xe2t_ceiling_fma_##NAME##_v##VEC##_c##CHAINS##_i##ITERS(T *out, T seed) {     \
    fma_chains<T, VEC, CHAINS, ITERS>(out, seed);                                    \
  }
#define XE2T_FMA_VARIANT(VEC, CHAINS, ITERS)                                          \
  XE2T_FMA_KERNEL(fp32, float, VEC, CHAINS, ITERS)                                   \
  XE2T_FMA_KERNEL(fp16, sycl::half, VEC, CHAINS, ITERS)

// One line per FMA_VARIANTS entry (a shape missing here fails the ceilings' build by name).
XE2T_FMA_VARIANT(8, 12, 20000)
XE2T_FMA_VARIANT(16, 4, 20000)
XE2T_FMA_VARIANT(16, 12, 10000)
XE2T_FMA_VARIANT(8, 12, 10000)
XE2T_FMA_VARIANT(1, 8, 200)
