// Minimal SYCL kernel that crashes Intel's Xe2 GPU compiler (IGC) with SIGSEGV.
//
// Construct: sycl::ext::oneapi::experimental::matrix::joint_matrix_apply on a joint_matrix that
// is a (non-array) member of a struct local variable. In the SPIR-V the run-time compiler emits
// for this file, the OpAccessChain that joint_matrix_apply produces (__spirv_AccessChain) starts
// from a Generic pointer to the *struct* (%struct_Holder), not to the OpTypeCooperativeMatrixKHR.
// IGC's SPIR-V reader turns it into
// `getelementptr %struct.Holder, ptr addrspace(4) %p, i32 0, i64 %i` (a dynamic index into a
// struct), and IGC segfaults in its joint-matrix lowering (last per-pass IR dump:
// *_Unify_after_igccodeassumption.ll; in a compiling variant the next dump is
// *_Unify_after_igcjointmatrixresolution.ll).
// The project's joint_matrix flash-attention prefill (kernels/sdpa_xmx_prefill.cpp, SageV1
// config) crashes the same way: `struct State { Acc o[MF][NDV]; float m[..]; float l[..]; }`,
// its output loop applies to st.o[mf][n], and IGC's input IR holds
// `getelementptr %"struct...State", ptr addrspace(4) %20, i32 0, i64 %249`.
//
// Crashes: ocloc 26.27.39122.14 (Debian intel-ocloc 26.27) with IGC 2.40.14 (libigc2), exit
// status -11 (SIGSEGV), every run (7 of 7 fresh builds, 6 of 6 ocloc re-runs on one SPIR-V;
// also for -device lnl-m, ptl, pvc, bmg-g31 and with -ze-opt-large-register-file).
//
// How to reproduce: build this file through the project's SYCL run-time compiler (kernel_compiler,
// source language sycl; free-function kernel) with SYCL_DUMP_IMAGES=1, e.g.
//   /work/probe/bisect/probe.py joint_matrix_crash.cpp jm_apply_struct_member
// (builds on the opencl:cpu device, which may fail; only the dumped SPIR-V matters), then
//   ocloc compile -spirv_input -file sycl_spir64_1.spv -device bmg -out_dir out
// No build defines and no -options are needed. Kernel name: jm_apply_struct_member.
// -DXE2T_IGC_CRASH_CONTROL builds the same kernel on a plain local joint_matrix: compiles (rc 0).
//
// Bisection facts (same compiler, device bmg; details in /work/probe/bisect/REPORT.md):
// - compiles: matrix as a plain local; plain local arrays `Acc a[1]`, `Acc a[2]` (a[1]),
//   `Acc a[1][2]` (a[0][1]); struct members `Acc m[1]` (m[0]), `Acc m[2]` (m[0]),
//   `Acc m[2][1]` (m[1][0]); this kernel without the joint_matrix_fill; the struct without
//   joint_matrix_apply (fill/store only).
// - crashes: struct member `Acc m` (this file; also with float arrays before it, with a second
//   matrix member applied to, with joint_matrix_load instead of fill, with or without a
//   joint_matrix_store or sub_group_size<16>); struct members `Acc m[2]` (m[1]),
//   `Acc m[1][2]` (m[0][0] and m[0][1]), `Acc m[2][2]` (m[1][1]). Coordinate apply
//   (sycl::ext::intel::experimental::matrix::joint_matrix_apply with row/col) crashes the same.
// - also crashes: a plain local `Acc o[2][8]` passed by reference to a helper function
//   (`void scale(sub_group, Acc (&o)[2][8], ...)`, with or without noinline) that applies to each
//   o[mf][n]; the same loops written in the kernel body compile.
//   What decides it is how the SPIR-V types the pointer joint_matrix_apply's OpAccessChain
//   starts from: a pointer to the OpTypeCooperativeMatrixKHR compiles; a pointer to the
//   enclosing struct (here %struct_Holder) or to the joint_matrix wrapper struct
//   (helper-function case: all 32 OpAccessChain) crashes. So: apply only to joint_matrix
//   variables or local arrays declared in the same function, never to one held in a struct
//   or reached through a reference parameter.
// - in the project's prefill, removing everything but the State init and the output apply loop
//   still crashes; removing only that output loop turns the crash into the compile error
//   "__spirv_AccessChain call 1st argument must be pointer to target extension type" /
//   undefined reference to `__spirv_AccessChain(...CooperativeMatrixKHR... AS1* AS4*, long)`
//   (from block()'s rescale apply on st.o through State&); removing the output loop and that
//   rescale apply compiles (rc 0), joint_matrix_copy and joint_matrix_prefetch included.
//   Moving `o` out of State into a kernel-local array passed by reference to run()/block():
//   the same compile error; plus removing block()'s rescale apply: compiles (rc 0).
#include <sycl/sycl.hpp>

namespace syclexp = sycl::ext::oneapi::experimental;
namespace jm = sycl::ext::oneapi::experimental::matrix;

using Acc = jm::joint_matrix<sycl::sub_group, float, jm::use::accumulator, 8, 16>;

struct Holder {
  Acc m;
};

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void jm_apply_struct_member() {
  auto sg = sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_sub_group();
#ifdef XE2T_IGC_CRASH_CONTROL
  Acc m;
#else
  Holder h;
  Acc &m = h.m;
#endif
  jm::joint_matrix_fill(sg, m, 1.0f);
  jm::joint_matrix_apply(sg, m, [](float &x) { x *= 2.0f; });
}
