// Bandwidth ceiling: a streaming copy, each work-item moving XE2T_VEC floats per step.
// Bytes = 2 * buffer size (read + write).
#include "sycl_device.hpp"

namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

constexpr int kVec = XE2T_VEC;
using VecT = sycl::vec<float, kVec>;

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void xe2t_ceiling_copy(float *dst, const float *src, long n_vec) {
  const auto it = syclext::this_work_item::get_nd_item<1>();
  const long stride = static_cast<long>(it.get_global_range(0));
  for (long i = static_cast<long>(it.get_global_id(0)); i < n_vec; i += stride) {
    *reinterpret_cast<VecT *>(dst + i * kVec) = *reinterpret_cast<const VecT *>(src + i * kVec);
  }
}
