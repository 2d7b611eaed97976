// One subgroup exercises each Xe primitive of kernels/sdpa_xe_builtins.hpp on a 16-bit matrix
// and writes what every lane holds, for tests/kernels/test_xe_builtins.py to compare with the
// built-ins' documented semantics: load_transposed and load_vnni at (x, y), load_vnni8 at byte
// column 2 x + 16, row y - 4 (the FP8 V load, here over the same bytes) of a surface of
// `height` rows x `width` bytes (pitch `pitch` bytes), an 8 x 16 local tile (the matrix's
// first 128 elements), DPAS of that tile by the VNNI operand, the two row reductions of the
// product, and a block store of the tile at (x, height - 4) of a surface shaped like the input
// (`out_s`, zero-filled by the caller). Built with XE2T_POLICY=0 (the emulation) on the CPU
// device.
#include <sycl/sycl.hpp>

#include "sdpa_xmx_ops.hpp"

namespace syclexp = sycl::ext::oneapi::experimental;
using Ops = xe2t::xmx::XeTileOps<sycl::half>;

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))
void xe_builtins_probe(const std::uint16_t *mat, int width, int height, int pitch, int x, int y,
                       int *out_t, int *out_v, int *out_v8, short *out_a, float *out_c,
                       float *out_max, float *out_sum, std::uint16_t *out_s) {
  static syclexp::work_group_static<std::uint16_t[128]> tile;
  const auto sg = sycl::ext::oneapi::this_work_item::get_sub_group();
  const int j = static_cast<int>(sg.get_local_linear_id());
  for (int i = j; i < 128; i += 16) tile[i] = mat[i];
  sycl::group_barrier(sg);
  const xe2t::xe::Surface s{mat, width, height, pitch};
  const auto t = Ops::Builtins::load_transposed(sg, s, x / 2, y);
  const auto v = Ops::Builtins::load_vnni(sg, s, x, y);
  const auto v8 = Ops::Builtins::load_vnni8(sg, s, 2 * x + 16, y - 4);
  const auto a = Ops::Builtins::load_local_tile(sg, &tile[0]);
  Ops::Acc c[1] = {Ops::Builtins::dpas<false>(sg, Ops::Acc{}, a, v)};
  for (int i = 0; i < 8; ++i) {
    out_t[j * 8 + i] = t[i];
    out_v[j * 8 + i] = v[i];
    out_v8[j * 8 + i] = v8[i];
    out_a[j * 8 + i] = a[i];
    out_c[j * 8 + i] = c[0][i];
  }
  Ops::Builtins::store_rows8(sg, xe2t::xe::Surface{out_s, width, height, pitch}, x, height - 4,
                             a);
  out_max[j] = Ops::row_reduce(sg, c, sycl::maximum<float>());
  out_sum[j] = Ops::row_reduce(sg, c, sycl::plus<float>());
}
