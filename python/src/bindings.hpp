// The parts of the cudyn extension module, each registered by one function
// (module.cpp calls them in dependency order: a class must be registered
// before a signature names it).
#pragma once

#include <pybind11/pybind11.h>

namespace cudyn {
class GrowableBuffer;
}  // namespace cudyn

namespace cudyn_python {

namespace py = pybind11;

void bind_driver(py::module_& module);   // driver_status, load_report, loader options
void bind_device(py::module_& module);   // Location, Device, PrimaryContext, Stream, Event, topology
void bind_memory_base(py::module_& module);  // Memory, Span, ArrayView, from_dlpack (memory_object.cpp)
void bind_buffers(py::module_& module);  // DeviceBuffer, PinnedBuffer, ZeroCopyBuffer, ManagedBuffer
void bind_vmm_pool(py::module_& module);  // GrowableBuffer, MemoryPool, StreamOrderedBuffer, CopyPlan
void bind_sharing(py::module_& module);   // FdChannel, PeerPolicy, export/import_allocation, ranges
void bind_state(py::module_& module);     // ledger, capability fingerprint, ProcessCheckpoint
void bind_bench_support(py::module_& module);  // _time_native, for bench/python_overhead.py

// The C++ GrowableBuffer of a cudyn.GrowableBuffer (TypeError for anything
// else, InvalidArgument naming `operation` once closed).
const cudyn::GrowableBuffer& growable_buffer_of(py::handle object, const char* operation);

}  // namespace cudyn_python
