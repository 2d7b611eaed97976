// The parts of SYCL the kernels here use, in place of <sycl/sycl.hpp> (which brings the whole
// host API: queues, handlers, images, graphs...). The run-time compiler's front end walks every
// function of a build's translation unit (clang's SYCL device call graph) and instantiates
// what its templates touch, precompiled preamble or not: with <sycl/sycl.hpp> that was most of
// a build. Median build 1.80 -> 1.21 s (benchmarks/kernel_build_time.py), the SPIR-V byte for
// byte the same (docs/cpu-runtime.md).
//
// kernels/_jit.py puts these #include lines, exactly as written here, ahead of every build as
// its precompiled preamble: the preamble's cache knows a header by its text, not by what the
// header then includes, so only <...> lines belong in this file.
#pragma once

#include <sycl/detail/defines_elementary.hpp>
#include <sycl/builtins.hpp>
#include <sycl/detail/vector_convert.hpp>
#include <sycl/ext/intel/experimental/grf_size_properties.hpp>
#include <sycl/ext/oneapi/bfloat16.hpp>
#include <sycl/ext/oneapi/experimental/prefetch.hpp>
#include <sycl/ext/oneapi/free_function_queries.hpp>
#include <sycl/ext/oneapi/kernel_properties/properties.hpp>
#include <sycl/ext/oneapi/matrix/matrix.hpp>
#include <sycl/ext/oneapi/work_group_static.hpp>
#include <sycl/functional.hpp>
#include <sycl/group_algorithm.hpp>
#include <sycl/group_barrier.hpp>
#include <sycl/sub_group.hpp>
#include <sycl/vector.hpp>
