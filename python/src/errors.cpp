#include "errors.hpp"

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace cudyn_python {
namespace {

// Builds the Python exception through cudyn.errors, so that the classes live
// in pure Python (subclassable, picklable, documented there).
void set_python_error(const cudyn::Error& error) {
    try {
        py::object make = py::module_::import("cudyn.errors").attr("_from_native");
        py::object instance = make(cudyn::to_string(error.code), error.describe(), static_cast<int>(error.driver_result),
                                   cudyn::cuda_error_name(error.driver_result), error.entry_point, error.message);
        PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance.ptr())), instance.ptr());
    } catch (py::error_already_set& failure) {
        failure.restore();  // cudyn.errors itself failed: report that instead
    }
}

}  // namespace

void register_error_translator() {
    py::register_exception_translator([](std::exception_ptr pointer) {
        try {
            if (pointer) std::rethrow_exception(pointer);
        } catch (const NativeError& native) {
            set_python_error(native.error);
        }
    });
}

}  // namespace cudyn_python
