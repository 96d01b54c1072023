// The one base of every Python memory object (the buffers, cudyn.Span,
// typed views): what memory it is, for DLPack, the CUDA array interface,
// copies and the buffer protocol, and the count of exports that keep its
// owner from closing underneath a consumer.
#pragma once

#include "dlpack_abi.hpp"

#include <cudyn/device/stream.hpp>
#include <cudyn/device/stream_ref.hpp>

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cudyn_python {

namespace py = pybind11;

struct MemoryDescription {
    std::uintptr_t address = 0;     // what DLPack's data pointer is: a host address for host kinds
    CUdeviceptr device_address = 0;  // where the device reaches it; 0 when it cannot (pinned, not mapped)
    std::size_t nbytes = 0;
    dlpack::Device device{dlpack::Cuda, 0};
    bool host_accessible = false;  // the process may read `address` directly
    bool read_only = false;
};

// The element type and shape a consumer sees: bytes unless a typed view says otherwise.
struct ElementType {
    dlpack::DataType dl{dlpack::UInt, 8, 1};
    char kind = 'u';          // the array-interface kind letter: b, i, u, f, c (0: none, bfloat16)
    std::size_t itemsize = 1;
    const char* name = "uint8";
};

struct ArrayLayout {
    ElementType element;
    std::vector<std::int64_t> shape;
};

class Memory {
public:
    Memory() = default;
    Memory(const Memory&) = delete;
    Memory& operator=(const Memory&) = delete;
    virtual ~Memory() = default;

    // What the memory is; raises InvalidArgument naming `operation` when it was closed.
    virtual MemoryDescription describe(const char* operation) const = 0;
    // The class name users see in messages ("DeviceBuffer").
    virtual const char* kind_name() const noexcept = 0;
    virtual bool closed() const noexcept = 0;
    // Frees an owner's memory (spans and views only drop their reference).
    virtual void close() = 0;
    // Waits for work the memory is ordered after (a stream-ordered buffer's
    // stream), before a synchronous copy or a DLPack export hands it on.
    virtual void make_ready(const char* /*operation*/) {}
    // The stream the array interface names for a consumer to wait on (0: none).
    virtual std::uintptr_t ordering_stream() const noexcept { return 0; }
    // What DLPack and the array interface describe: bytes (shape (nbytes,)) unless overridden.
    virtual ArrayLayout layout(const MemoryDescription& described) const {
        return {ElementType{}, {static_cast<std::int64_t>(described.nbytes)}};
    }

    // DLPack capsules, spans, views and memoryviews alive over this memory:
    // an owner refuses close() while any is (as bytearray refuses to resize).
    void add_export() noexcept { ++exports_; }
    void drop_export() noexcept { --exports_; }
    long exports() const noexcept { return exports_; }

protected:
    void require_no_exports(const char* operation) const;

private:
    long exports_ = 0;
};

// Raises InvalidArgument for a destroyed cudyn.Stream.
void require_live(const cudyn::Stream& stream, const char* operation);

// A stream argument from Python: None (the call is synchronous), a
// cudyn.Stream, or a raw CUstream handle as an int.
std::optional<cudyn::StreamRef> stream_argument(py::handle stream);

// Registers the base class cudyn.Memory with everything every memory object
// shares: nbytes, len(), addresses, copies, span(), view(), __dlpack__,
// __dlpack_device__, __cuda_array_interface__, close() and the context manager.
void bind_memory_base(py::module_& module);  // also in bindings.hpp

// The buffer protocol (memoryview, numpy.frombuffer) for a class of
// host-accessible memory: each view counts as an export while it lives.
void enable_host_buffer(py::handle cls);

// __dlpack__, __dlpack_device__, __cuda_array_interface__, span() and view()
// on cudyn.Memory; cudyn.Span, cudyn.ArrayView, cudyn.from_dlpack and
// cudyn.from_cuda_array_interface.
void bind_array_export(py::module_& module, py::class_<Memory>& memory_class);

}  // namespace cudyn_python
