// cudyn.Memory: what every memory object shares (copies, spans, views and the
// interop protocols are defined once here, on the base class).
#include "memory_object.hpp"

#include "errors.hpp"

#include <cudyn/device/stream.hpp>
#include <cudyn/memory/device_span.hpp>

#include <cstring>
#include <string>

namespace cudyn_python {

void Memory::require_no_exports(const char* operation) const {
    if (exports_ > 0)
        raise_invalid(std::string(operation) + ": " + std::to_string(exports_) +
                      " export(s) (DLPack capsules or tensors made from them, spans, views, memoryviews) still "
                      "use this memory; drop them first");
}

void require_live(const cudyn::Stream& stream, const char* operation) {
    // A destroyed stream's handle is null, which the driver would take for
    // the legacy default stream: refuse it instead.
    if (stream.handle() == nullptr) raise_invalid(std::string(operation) + ": the Stream was destroyed");
}

std::optional<cudyn::StreamRef> stream_argument(py::handle stream) {
    if (stream.is_none()) return std::nullopt;
    if (py::isinstance<cudyn::Stream>(stream)) {
        const auto& owned = stream.cast<const cudyn::Stream&>();
        require_live(owned, "stream argument");
        return cudyn::StreamRef(owned);
    }
    if (py::isinstance<py::int_>(stream))
        return cudyn::StreamRef(reinterpret_cast<CUstream>(stream.cast<std::uintptr_t>()));
    throw py::type_error("stream argument: expected None, a cudyn.Stream or a CUstream handle (int)");
}

namespace {

// One side of a copy: memory the device reaches, or host memory only.
struct Endpoint {
    std::uintptr_t host = 0;    // host address where the process reaches it, else 0
    CUdeviceptr device = 0;     // device address where the device reaches it, else 0
    std::size_t nbytes = 0;
};

// A copy argument: a cudyn memory object, or any bytes-like object (host).
// `buffer` keeps the Python buffer exported while the copy runs.
Endpoint endpoint(py::handle object, bool writable, const char* operation, py::buffer_info& buffer) {
    if (py::isinstance<Memory>(object)) {
        const MemoryDescription described = object.cast<const Memory&>().describe(operation);
        if (writable && described.read_only) raise_invalid(std::string(operation) + ": the destination is read-only");
        return {described.host_accessible ? described.address : 0, described.device_address, described.nbytes};
    }
    if (!PyObject_CheckBuffer(object.ptr()))
        throw py::type_error(std::string(operation) +
                             ": expected a cudyn memory object or a bytes-like object (bytes, bytearray, "
                             "memoryview, a contiguous numpy array)");
    buffer = py::reinterpret_borrow<py::buffer>(object).request(writable);
    // A strided host array cannot be copied as one byte range.
    if (buffer.ndim > 0) {
        py::ssize_t expected = buffer.itemsize;
        for (py::ssize_t axis = buffer.ndim - 1; axis >= 0; --axis) {
            const auto i = static_cast<std::size_t>(axis);
            if (buffer.shape[i] > 1 && buffer.strides[i] != expected)
                raise_invalid(std::string(operation) + ": the host array is not contiguous");
            expected *= buffer.shape[i];
        }
    }
    return {reinterpret_cast<std::uintptr_t>(buffer.ptr), 0,
            static_cast<std::size_t>(buffer.size) * static_cast<std::size_t>(buffer.itemsize)};
}

// Copies source into the start of destination: the device copies wherever a
// side is device memory, a plain memcpy between two host-only sides.
void copy_between(py::handle destination, py::handle source, py::handle stream_object, const char* operation) {
    py::buffer_info destination_buffer;
    py::buffer_info source_buffer;
    const Endpoint to = endpoint(destination, true, operation, destination_buffer);
    const Endpoint from = endpoint(source, false, operation, source_buffer);
    const std::optional<cudyn::StreamRef> stream = stream_argument(stream_object);
    const cudyn::StreamRef* stream_pointer = stream ? &*stream : nullptr;
    if (!stream) {  // a synchronous copy follows the work either side is ordered after
        for (py::handle side : {destination, source})
            if (py::isinstance<Memory>(side)) side.cast<Memory&>().make_ready(operation);
    }
    if (from.nbytes > to.nbytes)
        raise_invalid(std::string(operation) + ": the source holds " + std::to_string(from.nbytes) +
                      " bytes, the destination only " + std::to_string(to.nbytes));
    cudyn::Result<void> result = cudyn::ok();
    {
        py::gil_scoped_release unlocked;
        if (to.device != 0 && from.device != 0) {
            result = cudyn::detail::copy_device_to_device(operation, {to.device, from.nbytes, 1},
                                                          {from.device, from.nbytes, 1}, stream_pointer);
        } else if (to.device != 0) {
            result = cudyn::detail::copy_host_to_device(operation, {to.device, to.nbytes, 1}, 0,
                                                        reinterpret_cast<const void*>(from.host), from.nbytes,
                                                        stream_pointer);
        } else if (from.device != 0) {
            result = cudyn::detail::copy_device_to_host(operation, reinterpret_cast<void*>(to.host), from.nbytes,
                                                        {from.device, from.nbytes, 1}, 0, stream_pointer);
        } else if (from.nbytes > 0) {
            std::memcpy(reinterpret_cast<void*>(to.host), reinterpret_cast<const void*>(from.host), from.nbytes);
        }
    }
    unwrap(std::move(result));
}

void set_bytes(const Memory& memory, int value, py::handle stream_object) {
    constexpr const char* operation = "Memory.set_bytes";
    if (value < 0 || value > 255) raise_invalid(std::string(operation) + ": value must be 0..255");
    const MemoryDescription described = memory.describe(operation);
    if (described.read_only) raise_invalid(std::string(operation) + ": the memory is read-only");
    const std::optional<cudyn::StreamRef> stream = stream_argument(stream_object);
    if (described.device_address == 0) {  // host-only memory
        std::memset(reinterpret_cast<void*>(described.address), value, described.nbytes);
        return;
    }
    cudyn::Result<void> result = cudyn::ok();
    {
        py::gil_scoped_release unlocked;
        result = cudyn::detail::set_device_bytes(operation, {described.device_address, described.nbytes, 1},
                                                 static_cast<std::uint8_t>(value), stream ? &*stream : nullptr);
    }
    unwrap(std::move(result));
}

// The C-level buffer protocol of host-accessible memory: one export per view.
int get_host_buffer(PyObject* self, Py_buffer* view, int flags) {
    try {
        Memory& memory = py::handle(self).cast<Memory&>();
        const MemoryDescription described = memory.describe("memoryview");
        if (!described.host_accessible) {
            PyErr_SetString(PyExc_BufferError, "memoryview: this memory is not reachable from the host");
            return -1;
        }
        if (PyBuffer_FillInfo(view, self, reinterpret_cast<void*>(described.address),
                              static_cast<Py_ssize_t>(described.nbytes), described.read_only ? 1 : 0, flags) != 0)
            return -1;
        memory.add_export();
        return 0;
    } catch (const NativeError& native) {
        PyErr_SetString(PyExc_BufferError, native.what());
        return -1;
    } catch (const std::exception& other) {
        PyErr_SetString(PyExc_BufferError, other.what());
        return -1;
    }
}

void release_host_buffer(PyObject* self, Py_buffer*) {
    try {
        py::handle(self).cast<Memory&>().drop_export();
    } catch (...) {
        // the object is a Memory (get_host_buffer checked it): nothing to report
    }
}

}  // namespace

void enable_host_buffer(py::handle cls) {
    auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
    type->tp_as_buffer->bf_getbuffer = get_host_buffer;
    type->tp_as_buffer->bf_releasebuffer = release_host_buffer;
}

void bind_memory_base(py::module_& module) {
    py::class_<Memory> memory_class(module, "Memory", R"doc(
Base class of every cudyn memory object: the owning buffers, cudyn.Span and
cudyn.ArrayView. Sizes are in bytes (``nbytes``, ``len()``).

Every memory object exports DLPack (``__dlpack__``, ``__dlpack_device__``) and,
where the device reaches it, ``__cuda_array_interface__`` (version 3). Owners
free their memory on ``close()``, at the end of a ``with`` block, or when
garbage-collected; ``close()`` raises what the driver reported and refuses
while exports (DLPack tensors, spans, views, memoryviews) are alive.)doc");
    memory_class
        .def_property_readonly("nbytes", [](const Memory& self) { return self.describe("Memory.nbytes").nbytes; },
                               "Size in bytes.")
        .def("__len__", [](const Memory& self) { return self.describe("len").nbytes; })
        .def_property_readonly(
            "address", [](const Memory& self) { return self.describe("Memory.address").address; },
            "The address DLPack reports: the host address of host memory (pinned, zero-copy), the device "
            "address otherwise.")
        .def_property_readonly(
            "device_address",
            [](const Memory& self) { return static_cast<std::uintptr_t>(self.describe("Memory.device_address").device_address); },
            "The device address (CUdeviceptr), 0 where the device cannot reach this memory.")
        .def_property_readonly("closed", &Memory::closed, "True once close() freed (or dropped) the memory.")
        .def_property_readonly("exports", &Memory::exports,
                               "How many exports (DLPack capsules, spans, views, memoryviews) are alive.")
        .def("close", &Memory::close,
             "Frees the memory now (owners) or drops the reference (spans, views); raises what the driver "
             "reported. A second close() does nothing.")
        .def("__enter__", [](py::object self) { return self; })
        .def("__exit__", [](Memory& self, py::args) { self.close(); })
        .def(
            "copy_from",
            [](py::object self, py::object source, py::object stream) {
                copy_between(self, source, stream, "Memory.copy_from");
            },
            py::arg("source"), py::arg("stream") = py::none(),
            "Copies `source` (a cudyn memory object or a bytes-like object) into the start of this memory. "
            "Without a stream it returns when the copy is done (the GIL released meanwhile); with one it is "
            "queued there and `source` must stay alive until the stream reaches it.")
        .def(
            "copy_to",
            [](py::object self, py::object destination, py::object stream) {
                copy_between(destination, self, stream, "Memory.copy_to");
            },
            py::arg("destination"), py::arg("stream") = py::none(),
            "Copies this memory into the start of `destination` (a cudyn memory object or a writable "
            "bytes-like object); the stream rule of copy_from.")
        .def(
            "to_bytes",
            [](py::object self) {
                const std::size_t size = self.cast<const Memory&>().describe("Memory.to_bytes").nbytes;
                py::bytearray out(std::string(size, '\0'));
                copy_between(out, self, py::none(), "Memory.to_bytes");
                return py::bytes(std::string(PyByteArray_AsString(out.ptr()), size));
            },
            "A host copy of the whole memory, as bytes (synchronous).")
        .def("set_bytes", &set_bytes, py::arg("value"), py::arg("stream") = py::none(),
             "Sets every byte to `value` (0..255); the stream rule of copy_from.");
    bind_array_export(module, memory_class);
}

}  // namespace cudyn_python
