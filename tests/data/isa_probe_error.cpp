// A kernel Intel's GPU compiler rejects, for tests/kernels/test_isa.py (its SPIR-V is checked in as
// tests/data/isa_probe_error.spv): joint_matrix_prefetch given a generic pointer, which IGC
// 2.40 cannot resolve ("Pointer type not found when resolving prefetch").
#include <sycl/sycl.hpp>

namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;
namespace mx = syclexp::matrix;

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))
void xe2t_isa_generic_prefetch(const sycl::half *a) {
  const auto sg = syclext::this_work_item::get_sub_group();
  mx::joint_matrix_prefetch<8, 16>(sg, const_cast<sycl::half *>(a), 16, mx::layout::row_major,
                                   syclexp::properties{syclexp::prefetch_hint_L1});
}
