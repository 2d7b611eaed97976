// A kernel that requires 16-lane subgroups and that the CPU device keeps in its bundle (no
// joint_matrix): it builds only under CL_CONFIG_CPU_VECTORIZER_MODE=0 (tests/kernels/test_spirv.py).
#include <sycl/sycl.hpp>

namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

// y[subgroup] = sum of the subgroup's 16 elements of x.
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))
void xe2t_probe_subgroup_sum(const float *x, float *y) {
  const auto it = syclext::this_work_item::get_nd_item<1>();
  const auto sg = it.get_sub_group();
  const float sum = sycl::reduce_over_group(sg, x[it.get_global_id(0)], sycl::plus<float>());
  if (sg.leader()) y[it.get_global_id(0) / 16] = sum;
}
