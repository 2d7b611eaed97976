// Python binding for the SYCL runtime compiler (sycl_ext_oneapi_kernel_compiler).
//
// dpctl 0.22 can only compile OpenCL C from source; this module compiles SYCL C++ free-function
// kernels at run time and hands them back as dpctl.program.SyclKernel objects, which dpctl's
// queue.submit launches (or submit_at_addresses, for memory dpctl will not wrap). It is built
// on first use against the installed environment's libsycl (kernels/_native_build.py), never at
// pip-install time, so no build-isolation path leaks into it.
//
// Written against the CPython C API and dpctl's Cython C API (the capsules of its modules'
// __pyx_capi__), not pybind11 and dpctl4pybind11.hpp: that first use is on the path of a new
// machine's first search, and the pybind11 module took 15-18 s to compile on a 2-vCPU Xeon
// (its template machinery, whatever the optimization level: 11 s at -O0), this one a third.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <CL/cl.h>
#include <sycl/backend/opencl.hpp>
#include <sycl/sycl.hpp>

namespace syclexp = sycl::ext::oneapi::experimental;

namespace {

// An owned reference, released when it goes out of scope.
class Ref {
 public:
  explicit Ref(PyObject *object = nullptr) : object_(object) {}
  Ref(const Ref &) = delete;
  Ref &operator=(const Ref &) = delete;
  ~Ref() { Py_XDECREF(object_); }
  PyObject *get() const { return object_; }
  PyObject *release() { return std::exchange(object_, nullptr); }
  explicit operator bool() const { return object_ != nullptr; }

 private:
  PyObject *object_;
};

// A Python error is already set: unwind to the entry point, which returns NULL.
struct PythonError {};

PyObject *check(PyObject *object) {
  if (object == nullptr) throw PythonError{};
  return object;
}

// dpctl's C API: its queue and kernel types, the sycl::queue / sycl::kernel behind an object
// (borrowed), and new objects from a sycl::kernel / sycl::event (copied).
struct Dpctl {
  PyTypeObject *queue_type = nullptr;
  PyTypeObject *kernel_type = nullptr;
  void *(*queue_ref)(PyObject *) = nullptr;
  void *(*kernel_ref)(PyObject *) = nullptr;
  PyObject *(*make_kernel)(void *, const char *) = nullptr;
  PyObject *(*make_event)(void *) = nullptr;
} dpctl;

// The C function `name` of a Cython module's C API (its __pyx_capi__ table of capsules).
void *capi_function(PyObject *module, const char *name) {
  Ref table(check(PyObject_GetAttrString(module, "__pyx_capi__")));
  PyObject *capsule = PyDict_GetItemString(table.get(), name);  // borrowed
  if (capsule == nullptr) {
    PyErr_Format(PyExc_ImportError, "%R has no C function %s", module, name);
    throw PythonError{};
  }
  void *function = PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule));
  if (function == nullptr) throw PythonError{};
  return function;
}

PyTypeObject *python_type(PyObject *module, const char *name) {
  PyObject *type = check(PyObject_GetAttrString(module, name));
  if (!PyType_Check(type)) {
    Py_DECREF(type);
    PyErr_Format(PyExc_ImportError, "%R.%s is not a type", module, name);
    throw PythonError{};
  }
  return reinterpret_cast<PyTypeObject *>(type);  // kept for the module's lifetime
}

void load_dpctl() {
  Ref queues(check(PyImport_ImportModule("dpctl._sycl_queue")));
  Ref programs(check(PyImport_ImportModule("dpctl.program._program")));
  Ref events(check(PyImport_ImportModule("dpctl._sycl_event")));
  dpctl.queue_type = python_type(queues.get(), "SyclQueue");
  dpctl.kernel_type = python_type(programs.get(), "SyclKernel");
  dpctl.queue_ref = reinterpret_cast<void *(*)(PyObject *)>(
      capi_function(queues.get(), "SyclQueue_GetQueueRef"));
  dpctl.kernel_ref = reinterpret_cast<void *(*)(PyObject *)>(
      capi_function(programs.get(), "SyclKernel_GetKernelRef"));
  dpctl.make_kernel = reinterpret_cast<PyObject *(*)(void *, const char *)>(
      capi_function(programs.get(), "SyclKernel_Make"));
  dpctl.make_event = reinterpret_cast<PyObject *(*)(void *)>(
      capi_function(events.get(), "SyclEvent_Make"));
}

// ---- arguments ----------------------------------------------------------------------------

sycl::queue &as_queue(PyObject *object) {
  if (!PyObject_TypeCheck(object, dpctl.queue_type)) {
    PyErr_SetString(PyExc_TypeError, "expected a dpctl.SyclQueue");
    throw PythonError{};
  }
  return *static_cast<sycl::queue *>(dpctl.queue_ref(object));
}

const sycl::kernel &as_kernel(PyObject *object) {
  if (!PyObject_TypeCheck(object, dpctl.kernel_type)) {
    PyErr_SetString(PyExc_TypeError, "expected a dpctl.program.SyclKernel");
    throw PythonError{};
  }
  return *static_cast<sycl::kernel *>(dpctl.kernel_ref(object));
}

std::string as_string(PyObject *object) {
  Py_ssize_t size = 0;
  const char *data = PyUnicode_AsUTF8AndSize(object, &size);
  if (data == nullptr) throw PythonError{};
  return std::string(data, static_cast<size_t>(size));
}

std::string as_bytes(PyObject *object) {
  char *data = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(object, &data, &size) != 0) throw PythonError{};
  return std::string(data, static_cast<size_t>(size));
}

// Each item of a sequence, converted by `convert`.
template <class Convert>
auto as_vector(PyObject *sequence, Convert convert) {
  Ref items(check(PySequence_Fast(sequence, "expected a sequence")));
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(items.get());
  std::vector<decltype(convert(sequence))> out;
  out.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i)
    out.push_back(convert(PySequence_Fast_GET_ITEM(items.get(), i)));
  return out;
}

std::pair<std::string, std::string> as_string_pair(PyObject *object) {
  const auto pair = as_vector(object, as_string);
  if (pair.size() != 2) {
    PyErr_SetString(PyExc_ValueError, "expected (name, text) pairs");
    throw PythonError{};
  }
  return {pair[0], pair[1]};
}

size_t as_size(PyObject *object) {
  const size_t value = PyLong_AsSize_t(object);
  if (value == static_cast<size_t>(-1) && PyErr_Occurred()) throw PythonError{};
  return value;
}

// ---- results ------------------------------------------------------------------------------

PyObject *kernel_object(const sycl::kernel &kernel) {
  return check(dpctl.make_kernel(const_cast<sycl::kernel *>(&kernel), "xe2tune_kernel"));
}

void set_item(PyObject *dict, const std::string &key, PyObject *value) {
  Ref owned(value);
  Ref name(check(PyUnicode_FromStringAndSize(key.data(), static_cast<Py_ssize_t>(key.size()))));
  if (PyDict_SetItem(dict, name.get(), owned.get()) != 0) throw PythonError{};
}

// Runs `body` (which returns a new reference), turning C++ exceptions into Python ones.
template <class Body>
PyObject *entry(Body body) {
  try {
    return body();
  } catch (const PythonError &) {
    return nullptr;
  } catch (const std::invalid_argument &e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::exception &e) {  // sycl::exception among them
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception");
  }
  return nullptr;
}

// Raised with the compiler's full log; Python wraps it into KernelCompileError.
PyObject *build_error_type = nullptr;

PyObject *build_sycl_source(PyObject *, PyObject *args) {
  PyObject *py_queue, *py_source, *py_headers, *py_names, *py_options;
  if (!PyArg_ParseTuple(args, "OOOOO:build_sycl_source", &py_queue, &py_source, &py_headers,
                        &py_names, &py_options))
    return nullptr;
  return entry([&]() -> PyObject * {
    sycl::queue &queue = as_queue(py_queue);
    const std::string source = as_string(py_source);
    const auto headers = as_vector(py_headers, as_string_pair);
    const auto kernel_names = as_vector(py_names, as_string);
    const auto options = as_vector(py_options, as_string);
    std::string log;
    std::string failure;
    std::optional<sycl::kernel_bundle<sycl::bundle_state::executable>> exe;
    // Compiling takes seconds: let other Python threads (the next measurement) run meanwhile.
    PyThreadState *released = PyEval_SaveThread();
    try {
      syclexp::include_files includes;
      for (const auto &[name, text] : headers) includes.add(name, text);
      auto src = syclexp::create_kernel_bundle_from_source(
          queue.get_context(), syclexp::source_language::sycl, source,
          syclexp::properties{includes});
      exe = syclexp::build(src, std::vector<sycl::device>{queue.get_device()},
                           syclexp::properties{syclexp::build_options{options},
                                               syclexp::save_log{&log}});
    } catch (const std::exception &e) {
      failure = e.what();
    } catch (...) {  // nothing may unwind past here without the GIL taken back
      failure = "the SYCL runtime threw an unknown exception";
    }
    PyEval_RestoreThread(released);
    auto fail = [&](const std::string &message) {
      Ref value(check(Py_BuildValue("(s#s#)", message.data(), Py_ssize_t(message.size()),
                                    log.empty() ? message.data() : log.data(),
                                    Py_ssize_t(log.empty() ? message.size() : log.size()))));
      PyErr_SetObject(build_error_type, value.get());
      return PythonError{};
    };
    if (!exe) throw fail(failure);
    Ref kernels(check(PyDict_New()));
    // IGC's spill bytes per kernel, where the device reports them (Level Zero)
    Ref spills(check(PyDict_New()));
    const sycl::device device = queue.get_device();
    const bool reports_spills = device.has(sycl::aspect::ext_intel_spill_memory_size);
    for (const auto &name : kernel_names) {
      if (!exe->ext_oneapi_has_kernel(name))
        throw fail("kernel '" + name + "' is not in the built program");
      const sycl::kernel kernel = exe->ext_oneapi_get_kernel(name);
      set_item(kernels.get(), name, kernel_object(kernel));
      if (reports_spills)
        set_item(spills.get(), name, check(PyLong_FromUnsignedLongLong(kernel.get_info<
                     sycl::ext::intel::info::kernel_device_specific::spill_memory_size>(
                     device))));
    }
    return Py_BuildValue("(Os#O)", kernels.get(), log.data(), Py_ssize_t(log.size()),
                         spills.get());
  });
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

void check_cl(cl_int status, const char *call) {
  if (status != CL_SUCCESS) throw std::runtime_error(std::string(call) + " returned " +
                                                     std::to_string(status));
}

// The device binaries of the programs the kernels were built into (a build may split its
// kernels into several) and, per kernel in the order given, its name in its program and that
// program's index: (binaries, symbols, programs); ([], [], []) where the backend is not OpenCL.
PyObject *program_binaries(PyObject *, PyObject *args) {
  PyObject *py_queue, *py_kernels;
  if (!PyArg_ParseTuple(args, "OO:program_binaries", &py_queue, &py_kernels)) return nullptr;
  return entry([&]() -> PyObject * {
    sycl::queue &queue = as_queue(py_queue);
    const auto kernels = as_vector(py_kernels, [](PyObject *k) { return as_kernel(k); });
    Ref binaries(check(PyList_New(0))), symbols(check(PyList_New(0))),
        indices(check(PyList_New(0)));
    auto append = [](PyObject *list, PyObject *item) {
      Ref owned(check(item));
      if (PyList_Append(list, owned.get()) != 0) throw PythonError{};
    };
    if (queue.get_backend() == sycl::backend::opencl) {
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
          status = cl.get_kernel_info(native, CL_KERNEL_PROGRAM, sizeof(program), &program,
                                      nullptr);
        cl.release_kernel(native);
        check_cl(status, "clGetKernelInfo");
        name.resize(length > 0 ? length - 1 : 0);
        append(symbols.get(), PyUnicode_FromStringAndSize(name.data(), Py_ssize_t(name.size())));
        auto found = std::find(programs.begin(), programs.end(), program);
        append(indices.get(), PyLong_FromSsize_t(found - programs.begin()));
        if (found == programs.end()) programs.push_back(program);
      }
      for (cl_program program : programs) {
        cl_uint devices = 0;
        check_cl(cl.get_program_info(program, CL_PROGRAM_NUM_DEVICES, sizeof(devices), &devices,
                                     nullptr),
                 "clGetProgramInfo");
        if (devices != 1)
          throw std::runtime_error("a program is built for more than one device");
        size_t size = 0;
        check_cl(cl.get_program_info(program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size,
                                     nullptr),
                 "clGetProgramInfo");
        std::string binary(size, '\0');
        unsigned char *data = reinterpret_cast<unsigned char *>(binary.data());
        check_cl(cl.get_program_info(program, CL_PROGRAM_BINARIES, sizeof(data), &data, nullptr),
                 "clGetProgramInfo");
        append(binaries.get(), PyBytes_FromStringAndSize(binary.data(), Py_ssize_t(size)));
      }
    }
    return Py_BuildValue("(OOO)", binaries.get(), symbols.get(), indices.get());
  });
}

// Kernels {symbol: SyclKernel} of a device binary program_binaries returned, for the queue's
// OpenCL device.
PyObject *load_program_binary(PyObject *, PyObject *args) {
  PyObject *py_queue, *py_binary, *py_symbols;
  if (!PyArg_ParseTuple(args, "OOO:load_program_binary", &py_queue, &py_binary, &py_symbols))
    return nullptr;
  return entry([&]() -> PyObject * {
    sycl::queue &queue = as_queue(py_queue);
    const std::string binary = as_bytes(py_binary);
    const auto symbols = as_vector(py_symbols, as_string);
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
    if (status == CL_SUCCESS)
      status = cl.build_program(program, 1, &device, "", nullptr, nullptr);
    cl.release_device(device);
    std::vector<std::pair<std::string, sycl::kernel>> made;
    for (const auto &symbol : symbols) {
      if (status != CL_SUCCESS) break;
      cl_kernel native = cl.create_kernel(program, symbol.c_str(), &status);
      if (status != CL_SUCCESS) break;
      made.emplace_back(symbol, sycl::make_kernel<sycl::backend::opencl>(native, context));
      cl.release_kernel(native);  // make_kernel retained it
    }
    if (program != nullptr) cl.release_program(program);
    check_cl(status, "loading a device binary");
    Ref kernels(check(PyDict_New()));
    for (const auto &[symbol, kernel] : made) set_item(kernels.get(), symbol, kernel_object(kernel));
    return kernels.release();
  });
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
PyObject *submit_at_addresses(PyObject *, PyObject *args) {
  PyObject *py_queue, *py_kernel, *py_kinds, *py_values, *py_global, *py_local;
  if (!PyArg_ParseTuple(args, "OOOOOO:submit_at_addresses", &py_queue, &py_kernel, &py_kinds,
                        &py_values, &py_global, &py_local))
    return nullptr;
  return entry([&]() -> PyObject * {
    sycl::queue &queue = as_queue(py_queue);
    const sycl::kernel &kernel = as_kernel(py_kernel);
    const auto kinds = as_vector(py_kinds, as_string);
    Ref values(check(PySequence_Fast(py_values, "values must be a sequence")));
    const auto global = as_vector(py_global, as_size);
    const auto local = as_vector(py_local, as_size);
    if (kinds.size() != size_t(PySequence_Fast_GET_SIZE(values.get())) ||
        global.size() != local.size() || global.empty() || global.size() > 3)
      throw std::invalid_argument("kinds/values or global/local sizes disagree (1-3 dims)");
    // Each argument read once, as the kind it is set as.
    struct Arg {
      enum { pointer, int32, float32 } kind;
      std::uintptr_t address = 0;
      int32_t int_value = 0;
      float float_value = 0.0f;
    };
    std::vector<Arg> converted(kinds.size());
    for (size_t i = 0; i < kinds.size(); ++i) {
      PyObject *value = PySequence_Fast_GET_ITEM(values.get(), Py_ssize_t(i));
      Arg &arg = converted[i];
      if (kinds[i] == "ptr") {
        arg.kind = Arg::pointer;
        arg.address = static_cast<std::uintptr_t>(PyLong_AsUnsignedLongLong(value));
      } else if (kinds[i] == "int") {
        const long n = PyLong_AsLong(value);
        if (!PyErr_Occurred() && (n < std::numeric_limits<int32_t>::min() ||
                                  n > std::numeric_limits<int32_t>::max()))
          PyErr_SetString(PyExc_OverflowError, "an \"int\" argument does not fit in int32");
        arg.kind = Arg::int32;
        arg.int_value = static_cast<int32_t>(n);
      } else if (kinds[i] == "float") {
        arg.kind = Arg::float32;
        arg.float_value = static_cast<float>(PyFloat_AsDouble(value));
      } else {
        throw std::invalid_argument("unknown argument kind '" + kinds[i] + "'");
      }
      if (PyErr_Occurred()) throw PythonError{};
    }
    sycl::event event = queue.submit([&](sycl::handler &cgh) {
      for (size_t i = 0; i < converted.size(); ++i) {
        const Arg &arg = converted[i];
        switch (arg.kind) {
          case Arg::pointer:
            cgh.set_arg(static_cast<int>(i), reinterpret_cast<void *>(arg.address));
            break;
          case Arg::int32: cgh.set_arg(static_cast<int>(i), arg.int_value); break;
          case Arg::float32: cgh.set_arg(static_cast<int>(i), arg.float_value); break;
        }
      }
      switch (global.size()) {
        case 1: cgh.parallel_for(make_nd_range<1>(global, local), kernel); break;
        case 2: cgh.parallel_for(make_nd_range<2>(global, local), kernel); break;
        default: cgh.parallel_for(make_nd_range<3>(global, local), kernel); break;
      }
    });
    return check(dpctl.make_event(&event));
  });
}

PyObject *can_build_sycl(PyObject *, PyObject *args) {
  PyObject *py_queue;
  if (!PyArg_ParseTuple(args, "O:can_build_sycl", &py_queue)) return nullptr;
  return entry([&]() -> PyObject * {
    return PyBool_FromLong(
        as_queue(py_queue).get_device().ext_oneapi_can_build(syclexp::source_language::sycl));
  });
}

// dpctl 0.22 has no name for this aspect: whether joint_matrix reaches a matrix engine (Intel
// XMX on GPUs, AMX on Xeons) on the queue's device.
PyObject *has_matrix_aspect(PyObject *, PyObject *args) {
  PyObject *py_queue;
  if (!PyArg_ParseTuple(args, "O:has_matrix_aspect", &py_queue)) return nullptr;
  return entry([&]() -> PyObject * {
    return PyBool_FromLong(as_queue(py_queue).get_device().has(sycl::aspect::ext_intel_matrix));
  });
}

PyMethodDef methods[] = {
    {"build_sycl_source", build_sycl_source, METH_VARARGS,
     "build_sycl_source(queue, source, headers, kernel_names, options): compile SYCL source "
     "for the queue's device; returns ({name: SyclKernel}, log, {name: spill bytes} (empty "
     "where the device does not report spills))."},
    {"submit_at_addresses", submit_at_addresses, METH_VARARGS,
     "submit_at_addresses(queue, kernel, kinds, values, global_size, local_size): submit a "
     "kernel over an nd-range with pointer arguments given as addresses (kind \"ptr\"), int32 "
     "(\"int\") and float (\"float\") scalars; returns its event."},
    {"program_binaries", program_binaries, METH_VARARGS,
     "program_binaries(queue, kernels): the device binaries of the OpenCL programs the kernels "
     "were built into, each kernel's name in its program and that program's index; empty on "
     "other backends."},
    {"load_program_binary", load_program_binary, METH_VARARGS,
     "load_program_binary(queue, binary, symbols): the kernels {symbol: SyclKernel} of a "
     "device binary from program_binaries, for the queue's OpenCL device (RuntimeError if the "
     "driver refuses it)."},
    {"can_build_sycl", can_build_sycl, METH_VARARGS,
     "can_build_sycl(queue): whether the device's runtime can compile SYCL source."},
    {"has_matrix_aspect", has_matrix_aspect, METH_VARARGS,
     "has_matrix_aspect(queue): whether the device has the ext_intel_matrix aspect "
     "(joint_matrix on a matrix engine)."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_sycl_jit",
    "SYCL C++ run-time compilation returning dpctl.program.SyclKernel objects", -1, methods,
};

}  // namespace

PyMODINIT_FUNC PyInit__sycl_jit() {
  try {
    load_dpctl();
  } catch (const PythonError &) {
    return nullptr;
  }
  Ref module(PyModule_Create(&module_def));
  if (!module) return nullptr;
  build_error_type = PyErr_NewException("_sycl_jit.BuildError", PyExc_RuntimeError, nullptr);
  if (build_error_type == nullptr) return nullptr;
  Py_INCREF(build_error_type);
  if (PyModule_AddObject(module.get(), "BuildError", build_error_type) != 0) {
    Py_DECREF(build_error_type);
    return nullptr;
  }
  return module.release();
}
