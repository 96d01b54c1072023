// Memory that changes size or lives on a stream: GrowableBuffer (VMM),
// MemoryPool and StreamOrderedBuffer; and CopyPlan, many copies in one call.
#include "bindings.hpp"
#include "owner.hpp"

#include <cudyn/device/device.hpp>
#include <cudyn/loader/driver_call.hpp>
#include <cudyn/memory/copy_plan.hpp>
#include <cudyn/pool/memory_pool.hpp>
#include <cudyn/pool/stream_ordered_buffer.hpp>
#include <cudyn/vmm/growable_buffer.hpp>

#include <string>
#include <vector>

namespace cudyn_python {

// GrowableBuffer has no free(): moving an empty one in releases it. The C++
// destructor reports nothing, and neither can this.
template <>
struct Release<cudyn::GrowableBuffer> {
    static cudyn::Result<void> run(cudyn::GrowableBuffer& buffer) {
        buffer = cudyn::GrowableBuffer();
        return cudyn::ok();
    }
};

namespace {

using Byte = std::uint8_t;

cudyn::HandleType handle_types_argument(bool shareable) {
    return shareable ? cudyn::HandleType::PosixFileDescriptor : cudyn::HandleType::None;
}

class PyGrowableBuffer final : public Owner<cudyn::GrowableBuffer> {
public:
    PyGrowableBuffer(std::size_t capacity, int device, std::size_t chunk_size, bool shareable)
        : Owner(make(capacity, device, chunk_size, shareable), "GrowableBuffer"), device_(device) {}
    MemoryDescription describe(const char* operation) const override {
        require_open(operation);
        return device_memory(buffer_.device_address(), buffer_.released() ? 0 : buffer_.size_bytes(), device_);
    }
    // A change that unmaps memory waits until nothing exported points into it.
    void resize(const char* operation, std::size_t bytes) {
        require_open(operation);
        if (bytes < buffer_.size_bytes()) require_no_exports(operation);
        call_unlocked([&] { return buffer_.resize(bytes); });
    }
    void release_physical(bool save) {
        require_open("GrowableBuffer.release_physical");
        require_no_exports("GrowableBuffer.release_physical");
        call_unlocked([&] {
            return buffer_.release_physical(save ? cudyn::GrowableBuffer::Contents::Save
                                                 : cudyn::GrowableBuffer::Contents::Discard);
        });
    }

private:
    static cudyn::GrowableBuffer make(std::size_t capacity, int device, std::size_t chunk_size, bool shareable) {
        cudyn::GrowableBufferOptions options;
        options.chunk_size_bytes = chunk_size;
        const auto properties =
            cudyn::AllocationProperties::device(device).with_handle_types(handle_types_argument(shareable));
        return unwrap(cudyn::GrowableBuffer::create(properties, capacity, options));
    }
    int device_;
};

cudyn::PoolReuse reuse_policy(const std::string& name) {
    if (name == "follow_event_dependencies") return cudyn::PoolReuse::FollowEventDependencies;
    if (name == "allow_opportunistic") return cudyn::PoolReuse::AllowOpportunistic;
    if (name == "allow_internal_dependencies") return cudyn::PoolReuse::AllowInternalDependencies;
    raise_invalid("MemoryPool.set_reuse: unknown policy '" + name +
                  "' (follow_event_dependencies, allow_opportunistic, allow_internal_dependencies)");
}

// The stream of a stream-ordered allocation: required, since the memory is ordered on it.
cudyn::StreamRef required_stream(py::handle stream, const char* operation) {
    const auto ref = stream_argument(stream);
    if (!ref) raise_invalid(std::string(operation) + ": a stream is required (the memory is ordered on it)");
    return *ref;
}

class PyStreamOrderedBuffer final : public Owner<cudyn::StreamOrderedBuffer<Byte>> {
public:
    PyStreamOrderedBuffer(std::size_t nbytes, py::object stream, const cudyn::MemoryPool* pool)
        : Owner(allocate(nbytes, required_stream(stream, "StreamOrderedBuffer"), pool), "StreamOrderedBuffer"),
          stream_object_(std::move(stream)) {}
    MemoryDescription describe(const char* operation) const override {
        require_open(operation);
        return device_memory(buffer_.device_address(), buffer_.size_bytes(), device_.of(buffer_.device_address()));
    }
    void make_ready(const char* operation) override {
        require_open(operation);
        const CUstream stream = buffer_.stream();
        call_unlocked([&] { return cudyn::call_driver(&cudyn::DriverTable::cuStreamSynchronize_v2000, stream); });
    }
    std::uintptr_t ordering_stream() const noexcept override {
        const auto handle = reinterpret_cast<std::uintptr_t>(buffer_.stream());
        return handle == 0 ? 1 : handle;  // the array interface spells the legacy default stream 1
    }
    void use_on(py::object stream) {
        require_open("StreamOrderedBuffer.use_on");
        buffer_.use_on(required_stream(stream, "StreamOrderedBuffer.use_on"));
        stream_object_ = std::move(stream);  // kept alive: the free goes on it
    }
    void free_on(py::object stream) {
        if (buffer_.empty()) return;
        require_no_exports("StreamOrderedBuffer.free");
        const cudyn::StreamRef ref = required_stream(stream, "StreamOrderedBuffer.free");
        call_unlocked([&] { return buffer_.free(ref); });
    }

private:
    static cudyn::StreamOrderedBuffer<Byte> allocate(std::size_t nbytes, cudyn::StreamRef stream,
                                                     const cudyn::MemoryPool* pool) {
        return unwrap(pool != nullptr ? cudyn::StreamOrderedBuffer<Byte>::allocate(*pool, nbytes, stream)
                                      : cudyn::StreamOrderedBuffer<Byte>::allocate(nbytes, stream));
    }
    py::object stream_object_;  // the cudyn.Stream the memory is ordered on, kept alive
    LazyDevice device_;
};

// A copy endpoint for a plan: device memory, or host memory by address.
struct PlanSide {
    std::uintptr_t address = 0;
    std::size_t nbytes = 0;
    bool device = false;
};

PlanSide plan_side(py::handle object, bool writable, py::buffer_info& buffer) {
    if (py::isinstance<Memory>(object)) {
        const MemoryDescription described = object.cast<const Memory&>().describe("CopyPlan.add");
        if (described.device_address != 0) return {static_cast<std::uintptr_t>(described.device_address), described.nbytes, true};
        return {described.address, described.nbytes, false};
    }
    buffer = py::reinterpret_borrow<py::buffer>(object).request(writable);
    return {reinterpret_cast<std::uintptr_t>(buffer.ptr),
            static_cast<std::size_t>(buffer.size) * static_cast<std::size_t>(buffer.itemsize), false};
}

// A plan and the Python objects its copies point into, kept alive with it.
struct PyCopyPlan {
    cudyn::CopyPlan plan;
    std::vector<py::object> keep;
};

const char* path_name(cudyn::CopyPlan::Path path) {
    switch (path) {
        case cudyn::CopyPlan::Path::Batch13000: return "batch13000";
        case cudyn::CopyPlan::Path::Batch12080: return "batch12080";
        case cudyn::CopyPlan::Path::PerCopy: break;
    }
    return "per_copy";
}

void plan_add(PyCopyPlan& self, py::object destination, py::object source) {
    py::buffer_info destination_buffer;
    py::buffer_info source_buffer;
    const PlanSide to = plan_side(destination, true, destination_buffer);
    const PlanSide from = plan_side(source, false, source_buffer);
    if (from.nbytes != to.nbytes)
        raise_invalid("CopyPlan.add: the source holds " + std::to_string(from.nbytes) + " bytes, the destination " +
                      std::to_string(to.nbytes));
    cudyn::Result<void> added = cudyn::ok();
    if (to.device && from.device) {
        added = self.plan.add_bytes(to.address, from.address, to.nbytes);
    } else if (to.device) {
        added = self.plan.add(cudyn::DeviceSpan<Byte>(to.address, to.nbytes),
                              cudyn::HostSpan<const Byte>(reinterpret_cast<const Byte*>(from.address), from.nbytes));
    } else if (from.device) {
        added = self.plan.add(cudyn::HostSpan<Byte>(reinterpret_cast<Byte*>(to.address), to.nbytes),
                              cudyn::DeviceSpan<const Byte>(from.address, from.nbytes));
    } else {
        added = self.plan.add(cudyn::HostSpan<Byte>(reinterpret_cast<Byte*>(to.address), to.nbytes),
                              cudyn::HostSpan<const Byte>(reinterpret_cast<const Byte*>(from.address), from.nbytes));
    }
    unwrap(std::move(added));
    self.keep.push_back(std::move(destination));
    self.keep.push_back(std::move(source));
}

}  // namespace

const cudyn::GrowableBuffer& growable_buffer_of(py::handle object, const char* operation) {
    if (!py::isinstance<PyGrowableBuffer>(object))
        throw py::type_error(std::string(operation) + ": expected a cudyn.GrowableBuffer");
    const auto& growable = object.cast<const PyGrowableBuffer&>();
    growable.require_open(operation);
    return growable.buffer();
}

void bind_vmm_pool(py::module_& module) {
    py::class_<PyGrowableBuffer, Memory>(module, "GrowableBuffer", R"doc(
Device memory that grows and shrinks in place (VMM): an address range of
`capacity` bytes reserved once, physical memory mapped into it in chunks.
nbytes is the mapped size (0 after release_physical). `shareable=True`
makes it exportable to other processes (RangeExporter, export_allocation).)doc")
        .def(py::init<std::size_t, int, std::size_t, bool>(), py::arg("capacity"), py::kw_only(),
             py::arg("device") = 0, py::arg("chunk_size") = 0, py::arg("shareable") = false)
        .def(
            "grow_to", [](PyGrowableBuffer& self, std::size_t bytes) { self.resize("GrowableBuffer.grow_to", bytes); },
            py::arg("nbytes"), "Maps chunks until at least `nbytes` are mapped; the address does not change.")
        .def(
            "shrink_to",
            [](PyGrowableBuffer& self, std::size_t bytes) { self.resize("GrowableBuffer.shrink_to", bytes); },
            py::arg("nbytes"), "Unmaps whole chunks beyond `nbytes` (refused while exports are alive).")
        .def(
            "resize", [](PyGrowableBuffer& self, std::size_t bytes) { self.resize("GrowableBuffer.resize", bytes); },
            py::arg("nbytes"))
        .def("release_physical", &PyGrowableBuffer::release_physical, py::kw_only(), py::arg("save") = false,
             "Gives the physical memory back, keeping the address range; save=True keeps the bytes in pinned "
             "host memory for restore().")
        .def(
            "restore",
            [](PyGrowableBuffer& self) {
                self.require_open("GrowableBuffer.restore");
                call_unlocked([&] { return self.buffer().restore(); });
            },
            "Maps the memory again at the same address (with the saved bytes, if any).")
        .def_property_readonly("capacity", [](const PyGrowableBuffer& self) { return self.buffer().capacity_bytes(); })
        .def_property_readonly("chunk_size", [](const PyGrowableBuffer& self) { return self.buffer().chunk_size_bytes(); })
        .def_property_readonly("chunk_count", [](const PyGrowableBuffer& self) { return self.buffer().chunk_count(); })
        .def_property_readonly("released", [](const PyGrowableBuffer& self) { return self.buffer().released(); });

    py::class_<cudyn::MemoryPool>(module, "MemoryPool", R"doc(
A memory pool for stream-ordered allocation: MemoryPool(device) creates one
(`shareable=True`: exportable to other processes), MemoryPool.default_for(device)
is the device's default pool.)doc")
        .def(py::init([](int device, bool shareable, std::size_t max_size) {
                 return unwrap(cudyn::MemoryPool::create(cudyn::PoolProperties::device(device)
                                                             .with_handle_types(handle_types_argument(shareable))
                                                             .with_max_size_bytes(max_size)));
             }),
             py::arg("device") = 0, py::kw_only(), py::arg("shareable") = false, py::arg("max_size") = 0)
        .def_static(
            "default_for", [](int device) { return unwrap(cudyn::MemoryPool::default_for(unwrap(cudyn::Device::get(device)))); },
            py::arg("device") = 0)
        .def_property(
            "release_threshold", [](const cudyn::MemoryPool& self) { return unwrap(self.release_threshold()); },
            [](const cudyn::MemoryPool& self, std::uint64_t bytes) { unwrap(self.set_release_threshold(bytes)); },
            "Bytes the pool keeps reserved across synchronizations.")
        .def(
            "set_reuse",
            [](const cudyn::MemoryPool& self, const std::string& policy, bool enabled) {
                unwrap(self.set_reuse(reuse_policy(policy), enabled));
            },
            py::arg("policy"), py::arg("enabled"))
        .def(
            "usage",
            [](const cudyn::MemoryPool& self) {
                const cudyn::PoolUsage usage = unwrap(self.usage());
                py::dict result;
                result["reserved_bytes"] = usage.reserved_bytes;
                result["reserved_high_bytes"] = usage.reserved_high_bytes;
                result["used_bytes"] = usage.used_bytes;
                result["used_high_bytes"] = usage.used_high_bytes;
                return result;
            },
            "reserved_bytes, reserved_high_bytes, used_bytes, used_high_bytes, as a dict.")
        .def("trim_to", [](const cudyn::MemoryPool& self, std::size_t keep) { call_unlocked([&] { return self.trim_to(keep); }); },
             py::arg("keep_bytes"))
        .def("destroy", [](cudyn::MemoryPool& self) { unwrap(self.destroy()); })
        .def("close", [](cudyn::MemoryPool& self) { unwrap(self.destroy()); })
        .def_property_readonly("owned", &cudyn::MemoryPool::owned)
        .def("__enter__", [](py::object self) { return self; })
        .def("__exit__", [](cudyn::MemoryPool& self, py::args) { unwrap(self.destroy()); });

    py::class_<PyStreamOrderedBuffer, Memory>(module, "StreamOrderedBuffer", R"doc(
Device memory allocated on a stream (cuMemAllocAsync), from `pool` or the
device's current pool. Copies without a stream wait for its stream first; its
array interface names the stream; close() frees it on its stream.)doc")
        .def(py::init([](std::size_t nbytes, py::object stream, const cudyn::MemoryPool* pool) {
                 return std::make_unique<PyStreamOrderedBuffer>(nbytes, std::move(stream), pool);
             }),
             py::arg("nbytes"), py::arg("stream"), py::arg("pool") = nullptr, py::keep_alive<1, 4>())
        .def("use_on", &PyStreamOrderedBuffer::use_on, py::arg("stream"),
             "Records that the memory is now used on `stream`: the free will follow it.")
        .def("free", &PyStreamOrderedBuffer::free_on, py::arg("stream"), "Frees on `stream` instead of its own.");

    py::class_<PyCopyPlan>(module, "CopyPlan", R"doc(
Many copies issued in one call (cuMemcpyBatchAsync where the driver has it,
one copy each otherwise). add() takes cudyn memory or bytes-like objects of
equal size; execute(stream) issues them and returns the path taken.)doc")
        .def(py::init<>())
        .def("add", &plan_add, py::arg("destination"), py::arg("source"))
        .def("__len__", [](const PyCopyPlan& self) { return self.plan.size(); })
        .def("clear", [](PyCopyPlan& self) {
            self.plan.clear();
            self.keep.clear();
        })
        .def(
            "execute",
            [](const PyCopyPlan& self, py::object stream) {
                const auto ref = stream_argument(stream);
                const cudyn::CopyPlan::Path path =
                    ref ? call_unlocked([&] { return self.plan.execute(*ref); })
                        : call_unlocked([&] { return self.plan.execute(); });
                return path_name(path);
            },
            py::arg("stream") = py::none(),
            "Issues every copy on `stream` and returns the path taken: 'batch13000', 'batch12080' (one batch "
            "call, CUDA 13.0's or 12.8's ABI) or 'per_copy'. None: one copy at a time on the legacy default "
            "stream, returning when all are done (GIL released).");
}

}  // namespace cudyn_python
