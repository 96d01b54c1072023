// The parts of the cudyn extension module, each registered by one function
// (module.cpp calls them in dependency order: a class must be registered
// before a signature names it).
#pragma once

#include <pybind11/pybind11.h>

namespace cudyn_python {

namespace py = pybind11;

void bind_driver(py::module_& module);   // driver_status, load_report, loader options
void bind_device(py::module_& module);   // Location, Device, PrimaryContext, Stream, Event, topology
void bind_memory_base(py::module_& module);  // Memory, Span, ArrayView, from_dlpack (memory_object.cpp)
void bind_buffers(py::module_& module);  // DeviceBuffer, PinnedBuffer, ZeroCopyBuffer, ManagedBuffer

}  // namespace cudyn_python
