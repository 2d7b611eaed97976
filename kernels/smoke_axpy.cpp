// A minimal free-function kernel: the build path's smoke test and the template for new kernels.
#include "sycl_device.hpp"

namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void xe2t_axpy(float *y, const float *x, float a, int n) {
  const int i = static_cast<int>(syclext::this_work_item::get_nd_item<1>().get_global_id(0));
  if (i < n) y[i] += a * x[i] * XE2T_SCALE;
}
