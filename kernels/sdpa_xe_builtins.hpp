// The Xe matrix-engine primitives the xmx tile ops are written in: 2D block loads of K and V
// (transposed and VNNI-transformed on the fly), 2D block prefetches and stores, the subgroup
// block read of a Q fragment from local memory and the DPAS multiply-add, on per-lane vectors
// in the Xe DPAS register layout (SIMD16, lane j holds column j):
//   Frag8   float x 8    x[r] = C[r][j]                         (accumulator, 8 x 16)
//   Half8   16-bit x 8   x[r] = A[r][j]                         (A operand, 8 rows x 16 k)
//   Pair8   32-bit x 8   x[p] = B[2p][j] | B[2p + 1][j] << 16   (B operand, 16 k x 16, VNNI)
//
// Two implementations with identical results and ownership, chosen by XE2T_POLICY:
// - 1, native (an Intel GPU with 8 x 16 x 16 DPAS and 2D block IO: Xe2, Xe-HPC): the OpenCL
//   built-ins of cl_intel_subgroup_2d_block_io and cl_intel_subgroup_matrix_multiply_accumulate,
//   declared here and resolved by Intel's GPU compiler (IGC) from its built-in library. The
//   run-time compiler's SPIR-V translator leaves them as imported functions; it rejects the
//   SPIR-V spellings (__spirv_Subgroup2DBlockLoadINTEL, __spirv_SubgroupMatrixMultiply-
//   AccumulateINTEL) because its fixed extension list lacks SPV_INTEL_2d_block_io and
//   SPV_INTEL_subgroup_matrix_multiply_accumulate. joint_matrix is not used: IGC 2.40 crashes on
//   the mainloop written with it (tests/data/igc_crash/).
// - 0, emulated: the same semantics from subgroup shuffles and bounds-checked loads, for any
//   device with 16-lane subgroups (the OpenCL CPU runtime), so the mainloop and its tile ops
//   run the correctness grid where there is no matrix engine.
#pragma once

#include "sycl_device.hpp"

#include <cstdint>

namespace xe2t::xe {

using Frag8 = float __attribute__((ext_vector_type(8)));
using Half8 = short __attribute__((ext_vector_type(8)));
using Pair8 = int __attribute__((ext_vector_type(8)));  // int8 in the built-ins' signatures
using Int2 = int __attribute__((ext_vector_type(2)));

inline constexpr int kLanes = 16;

// A row-major matrix in global memory as the 2D block messages address it: `height` rows of
// `width` bytes, `pitch` bytes apart. Elements outside it read as 0: the hardware's bounds
// check, which replaces tail handling for K/V blocks that cross kv_len. The native messages
// need base 64-byte aligned, width and pitch >= 64 bytes and multiples of 16.
struct Surface {
  const void *base;
  int width;
  int height;
  int pitch;
};

}  // namespace xe2t::xe

#if XE2T_POLICY == 1
#include "sdpa_xe_builtins_native.hpp"
#elif XE2T_POLICY == 0
#include "sdpa_xe_builtins_emulated.hpp"
#else
#error "XE2T_POLICY must be 0 (emulated) or 1 (native Xe built-ins)"
#endif
