// Python binding for the SYCL runtime compiler (sycl_ext_oneapi_kernel_compiler).
//
// dpctl 0.22 can only compile OpenCL C from source; this module compiles SYCL C++ free-function
// kernels at run time and hands them back as dpctl.program.SyclKernel objects, which dpctl's
// queue.submit launches. It is built on first use against the installed environment's libsycl
// (see kernels/_jit.py), never at pip-install time, so no build-isolation path leaks into it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sycl/sycl.hpp>

#include "dpctl4pybind11.hpp"

namespace py = pybind11;
namespace syclexp = sycl::ext::oneapi::experimental;

namespace {

// Raised with the compiler's full log; Python wraps it into KernelCompileError.
PyObject *build_error_type = nullptr;

py::tuple build_sycl_source(sycl::queue &queue, const std::string &source,
                            const std::vector<std::pair<std::string, std::string>> &headers,
                            const std::vector<std::string> &kernel_names,
                            const std::vector<std::string> &options) {
  std::string log;
  std::string failure;
  std::optional<sycl::kernel_bundle<sycl::bundle_state::executable>> exe;
  {
    // Compiling takes seconds: let other Python threads (the next measurement) run meanwhile.
    py::gil_scoped_release release;
    try {
      syclexp::include_files includes;
      for (const auto &[name, text] : headers) includes.add(name, text);
      auto src = syclexp::create_kernel_bundle_from_source(
          queue.get_context(), syclexp::source_language::sycl, source,
          syclexp::properties{includes});
      exe = syclexp::build(src, std::vector<sycl::device>{queue.get_device()},
                           syclexp::properties{syclexp::build_options{options},
                                               syclexp::save_log{&log}});
    } catch (const sycl::exception &e) {
      failure = e.what();
    }
  }
  if (!exe) {
    PyErr_SetObject(build_error_type,
                    py::make_tuple(failure, log.empty() ? failure : log).ptr());
    throw py::error_already_set();
  }
  py::dict kernels;
  py::dict spills;  // IGC's spill bytes per kernel, where the device reports them (Level Zero)
  const sycl::device device = queue.get_device();
  const bool reports_spills = device.has(sycl::aspect::ext_intel_spill_memory_size);
  for (const auto &name : kernel_names) {
    if (!exe->ext_oneapi_has_kernel(name)) {
      PyErr_SetObject(build_error_type,
                      py::make_tuple("kernel '" + name + "' is not in the built program",
                                     log)
                          .ptr());
      throw py::error_already_set();
    }
    const sycl::kernel kernel = exe->ext_oneapi_get_kernel(name);
    kernels[py::str(name)] = kernel;
    if (reports_spills)
      spills[py::str(name)] = kernel.get_info<
          sycl::ext::intel::info::kernel_device_specific::spill_memory_size>(device);
  }
  return py::make_tuple(kernels, log, spills);
}

bool can_build_sycl(sycl::queue &queue) {
  return queue.get_device().ext_oneapi_can_build(syclexp::source_language::sycl);
}

// dpctl 0.22 has no name for this aspect: whether joint_matrix reaches a matrix engine (Intel
// XMX on GPUs, AMX on Xeons) on the queue's device.
bool has_matrix_aspect(sycl::queue &queue) {
  return queue.get_device().has(sycl::aspect::ext_intel_matrix);
}

}  // namespace

PYBIND11_MODULE(_sycl_jit, m) {
  m.doc() = "SYCL C++ run-time compilation returning dpctl.program.SyclKernel objects";
  build_error_type = PyErr_NewException("_sycl_jit.BuildError", PyExc_RuntimeError, nullptr);
  m.attr("BuildError") = py::handle(build_error_type);
  m.def("build_sycl_source", &build_sycl_source, py::arg("queue"), py::arg("source"),
        py::arg("headers"), py::arg("kernel_names"), py::arg("options"),
        "Compile SYCL source for the queue's device; returns ({name: SyclKernel}, log, "
        "{name: spill bytes} (empty where the device does not report spills)).");
  m.def("can_build_sycl", &can_build_sycl, py::arg("queue"),
        "Whether the device's runtime can compile SYCL source.");
  m.def("has_matrix_aspect", &has_matrix_aspect, py::arg("queue"),
        "Whether the device has the ext_intel_matrix aspect (joint_matrix on a matrix engine).");
}
