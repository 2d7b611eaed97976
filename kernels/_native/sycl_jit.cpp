// Python binding for the SYCL runtime compiler (sycl_ext_oneapi_kernel_compiler).
//
// dpctl 0.22 can only compile OpenCL C from source; this module compiles SYCL C++ free-function
// kernels at run time and hands them back as dpctl.program.SyclKernel objects, which dpctl's
// queue.submit launches (or submit_at_addresses, for memory dpctl will not wrap). It is built
// on first use against the installed environment's libsycl (see kernels/_jit.py), never at
// pip-install time, so no build-isolation path leaks into it.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <CL/cl.h>
#include <sycl/backend/opencl.hpp>
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

// The OpenCL calls that save and load a program's device binary. They are looked up in the ICD
// loader the SYCL runtime's OpenCL adapter has loaded (an OpenCL queue exists by then), not
// linked: on a machine with Level Zero alone the module must load without libOpenCL.
struct OpenCl {
  decltype(&clGetKernelInfo) get_kernel_info;
  decltype(&clGetProgramInfo) get_program_info;
  decltype(&clCreateProgramWithBinary) create_program_with_binary;
  decltype(&clBuildProgram) build_program;
  decltype(&clCreateKernel) create_kernel;
  decltype(&clReleaseKernel) release_kernel;
  decltype(&clReleaseProgram) release_program;
  decltype(&clReleaseContext) release_context;
  decltype(&clReleaseDevice) release_device;
};

const OpenCl &opencl() {
  static const OpenCl calls = [] {
    void *lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) throw std::runtime_error("the OpenCL ICD loader is not loaded");
    auto find = [lib](const char *name) {
      void *f = dlsym(lib, name);
      if (f == nullptr) throw std::runtime_error(std::string("no ") + name + " in libOpenCL");
      return f;
    };
    return OpenCl{
        reinterpret_cast<decltype(&clGetKernelInfo)>(find("clGetKernelInfo")),
        reinterpret_cast<decltype(&clGetProgramInfo)>(find("clGetProgramInfo")),
        reinterpret_cast<decltype(&clCreateProgramWithBinary)>(
            find("clCreateProgramWithBinary")),
        reinterpret_cast<decltype(&clBuildProgram)>(find("clBuildProgram")),
        reinterpret_cast<decltype(&clCreateKernel)>(find("clCreateKernel")),
        reinterpret_cast<decltype(&clReleaseKernel)>(find("clReleaseKernel")),
        reinterpret_cast<decltype(&clReleaseProgram)>(find("clReleaseProgram")),
        reinterpret_cast<decltype(&clReleaseContext)>(find("clReleaseContext")),
        reinterpret_cast<decltype(&clReleaseDevice)>(find("clReleaseDevice")),
    };
  }();
  return calls;
}

void check(cl_int status, const char *call) {
  if (status != CL_SUCCESS) throw std::runtime_error(std::string(call) + " returned " +
                                                     std::to_string(status));
}

// The device binaries of the programs the kernels were built into (a build may split its
// kernels into several) and, per kernel in the order given, its name in its program and that
// program's index: (binaries, symbols, programs); ([], [], []) where the backend is not OpenCL.
py::tuple program_binaries(sycl::queue &queue, const std::vector<sycl::kernel> &kernels) {
  py::list binaries, symbols, indices;
  if (queue.get_backend() != sycl::backend::opencl)
    return py::make_tuple(binaries, symbols, indices);
  const OpenCl &cl = opencl();
  std::vector<cl_program> programs;
  for (const auto &kernel : kernels) {
    cl_kernel native = sycl::get_native<sycl::backend::opencl>(kernel);  // retained for us
    std::string name(256, '\0');
    size_t length = 0;
    cl_program program = nullptr;
    cl_int status = cl.get_kernel_info(native, CL_KERNEL_FUNCTION_NAME, name.size(),
                                       name.data(), &length);
    if (status == CL_SUCCESS)
      status = cl.get_kernel_info(native, CL_KERNEL_PROGRAM, sizeof(program), &program, nullptr);
    cl.release_kernel(native);
    check(status, "clGetKernelInfo");
    name.resize(length > 0 ? length - 1 : 0);
    symbols.append(py::str(name));
    auto found = std::find(programs.begin(), programs.end(), program);
    indices.append(found - programs.begin());
    if (found == programs.end()) programs.push_back(program);
  }
  for (cl_program program : programs) {
    cl_uint devices = 0;
    check(cl.get_program_info(program, CL_PROGRAM_NUM_DEVICES, sizeof(devices), &devices,
                              nullptr),
          "clGetProgramInfo");
    if (devices != 1) throw std::runtime_error("a program is built for more than one device");
    size_t size = 0;
    check(cl.get_program_info(program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr),
          "clGetProgramInfo");
    std::string binary(size, '\0');
    unsigned char *data = reinterpret_cast<unsigned char *>(binary.data());
    check(cl.get_program_info(program, CL_PROGRAM_BINARIES, sizeof(data), &data, nullptr),
          "clGetProgramInfo");
    binaries.append(py::bytes(binary));
  }
  return py::make_tuple(binaries, symbols, indices);
}

// Kernels {symbol: SyclKernel} of a device binary program_binaries returned, for the queue's
// OpenCL device.
py::dict load_program_binary(sycl::queue &queue, const std::string &binary,
                             const std::vector<std::string> &symbols) {
  const OpenCl &cl = opencl();
  const sycl::context context = queue.get_context();
  cl_context native_context = sycl::get_native<sycl::backend::opencl>(context);
  cl_device_id device = sycl::get_native<sycl::backend::opencl>(queue.get_device());
  const size_t size = binary.size();
  const unsigned char *data = reinterpret_cast<const unsigned char *>(binary.data());
  cl_int binary_status = CL_SUCCESS;
  cl_int status = CL_SUCCESS;
  cl_program program = cl.create_program_with_binary(native_context, 1, &device, &size, &data,
                                                     &binary_status, &status);
  cl.release_context(native_context);
  if (status == CL_SUCCESS) status = binary_status;
  if (status == CL_SUCCESS) status = cl.build_program(program, 1, &device, "", nullptr, nullptr);
  cl.release_device(device);
  py::dict kernels;
  for (const auto &symbol : symbols) {
    if (status != CL_SUCCESS) break;
    cl_kernel native = cl.create_kernel(program, symbol.c_str(), &status);
    if (status != CL_SUCCESS) break;
    kernels[py::str(symbol)] = sycl::make_kernel<sycl::backend::opencl>(native, context);
    cl.release_kernel(native);  // make_kernel retained it
  }
  if (program != nullptr) cl.release_program(program);
  check(status, "loading a device binary");
  return kernels;
}

template <int Dims>
sycl::nd_range<Dims> make_nd_range(const std::vector<size_t> &global,
                                   const std::vector<size_t> &local) {
  sycl::range<Dims> g, l;
  for (int i = 0; i < Dims; ++i) {
    g[i] = global[i];
    l[i] = local[i];
  }
  return {g, l};
}

// Launches a kernel whose pointer arguments are plain addresses. dpctl.memory wraps only USM
// allocations of the queue's context and refuses any other pointer, but on a device with
// aspect::usm_system_allocations (Intel's OpenCL CPU runtime has it) memory from the system
// allocator, such as a torch CPU tensor's storage, is valid in a kernel as it is: SYCL's
// set_arg with the raw pointer, no copy. kinds[i] is "ptr" (an address), "int" or "float".
sycl::event submit_at_addresses(sycl::queue &queue, const sycl::kernel &kernel,
                                const std::vector<std::string> &kinds,
                                const std::vector<py::object> &values,
                                const std::vector<size_t> &global,
                                const std::vector<size_t> &local) {
  if (kinds.size() != values.size() || global.size() != local.size() || global.empty() ||
      global.size() > 3)
    throw std::invalid_argument("kinds/values or global/local sizes disagree (1-3 dims)");
  std::vector<std::uintptr_t> pointers(kinds.size());
  std::vector<int32_t> ints(kinds.size());
  std::vector<float> floats(kinds.size());
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i] == "ptr")
      pointers[i] = values[i].cast<std::uintptr_t>();
    else if (kinds[i] == "int")
      ints[i] = values[i].cast<int32_t>();
    else if (kinds[i] == "float")
      floats[i] = values[i].cast<float>();
    else
      throw std::invalid_argument("unknown argument kind '" + kinds[i] + "'");
  }
  return queue.submit([&](sycl::handler &cgh) {
    for (size_t i = 0; i < kinds.size(); ++i) {
      if (kinds[i] == "ptr")
        cgh.set_arg(static_cast<int>(i), reinterpret_cast<void *>(pointers[i]));
      else if (kinds[i] == "int")
        cgh.set_arg(static_cast<int>(i), ints[i]);
      else
        cgh.set_arg(static_cast<int>(i), floats[i]);
    }
    switch (global.size()) {
      case 1: cgh.parallel_for(make_nd_range<1>(global, local), kernel); break;
      case 2: cgh.parallel_for(make_nd_range<2>(global, local), kernel); break;
      default: cgh.parallel_for(make_nd_range<3>(global, local), kernel); break;
    }
  });
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
  m.def("submit_at_addresses", &submit_at_addresses, py::arg("queue"), py::arg("kernel"),
        py::arg("kinds"), py::arg("values"), py::arg("global_size"), py::arg("local_size"),
        "Submit a kernel over an nd-range with pointer arguments given as addresses "
        "(kind \"ptr\"), int32 (\"int\") and float (\"float\") scalars; returns its event.");
  m.def("program_binaries", &program_binaries, py::arg("queue"), py::arg("kernels"),
        "The device binaries of the OpenCL programs the kernels were built into, each "
        "kernel's name in its program and that program's index; empty on other backends.");
  m.def("load_program_binary", &load_program_binary, py::arg("queue"), py::arg("binary"),
        py::arg("symbols"),
        "The kernels {symbol: SyclKernel} of a device binary from program_binaries, for the "
        "queue's OpenCL device (RuntimeError if the driver refuses it).");
  m.def("can_build_sycl", &can_build_sycl, py::arg("queue"),
        "Whether the device's runtime can compile SYCL source.");
  m.def("has_matrix_aspect", &has_matrix_aspect, py::arg("queue"),
        "Whether the device has the ext_intel_matrix aspect (joint_matrix on a matrix engine).");
}
