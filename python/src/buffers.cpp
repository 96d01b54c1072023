// The four owning buffers: DeviceBuffer, PinnedBuffer, ZeroCopyBuffer,
// ManagedBuffer (bytes; a typed view gives an element type and shape).
#include "bindings.hpp"
#include "errors.hpp"
#include "memory_object.hpp"
#include "owner.hpp"

#include <cudyn/core/location.hpp>
#include <cudyn/device/peer_access.hpp>
#include <cudyn/memory/device_buffer.hpp>
#include <cudyn/memory/managed_buffer.hpp>
#include <cudyn/memory/memory_info.hpp>
#include <cudyn/memory/peer_copy.hpp>
#include <cudyn/memory/pinned_buffer.hpp>
#include <cudyn/memory/prefetch_plan.hpp>
#include <cudyn/memory/zero_copy_buffer.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace cudyn_python {

int owning_device(CUdeviceptr address) {
    auto attributes = cudyn::pointer_attributes(address);
    return attributes && attributes->device_ordinal >= 0 ? attributes->device_ordinal : 0;
}

MemoryDescription device_memory(CUdeviceptr address, std::size_t nbytes, int device) {
    MemoryDescription described;
    described.address = address;
    described.device_address = address;
    described.nbytes = nbytes;
    described.device = {dlpack::Cuda, device};
    return described;
}

namespace {

using Byte = std::uint8_t;

class PyDeviceBuffer final : public Owner<cudyn::DeviceBuffer<Byte>> {
public:
    explicit PyDeviceBuffer(std::size_t nbytes)
        : Owner(unwrap(cudyn::DeviceBuffer<Byte>::allocate(nbytes)), "DeviceBuffer") {}
    MemoryDescription describe(const char* operation) const override {
        require_open(operation);
        return device_memory(buffer_.device_address(), buffer_.size_bytes(), device_.of(buffer_.device_address()));
    }

private:
    LazyDevice device_;
};

cudyn::PinnedFlags pinned_flags(bool portable, bool write_combined) {
    cudyn::PinnedFlags flags;
    flags.portable = portable;
    flags.write_combined = write_combined;
    return flags;
}

class PyPinnedBuffer final : public Owner<cudyn::PinnedBuffer<Byte>> {
public:
    PyPinnedBuffer(std::size_t nbytes, bool portable, bool write_combined)
        : Owner(unwrap(cudyn::PinnedBuffer<Byte>::allocate(nbytes, pinned_flags(portable, write_combined))),
                "PinnedBuffer") {}
    MemoryDescription describe(const char* operation) const override {
        require_open(operation);
        MemoryDescription described;
        described.address = reinterpret_cast<std::uintptr_t>(buffer_.data());
        described.nbytes = buffer_.size_bytes();
        described.device = {dlpack::CudaHost, 0};
        described.host_accessible = true;
        return described;
    }
};

class PyZeroCopyBuffer final : public Owner<cudyn::ZeroCopyBuffer<Byte>> {
public:
    PyZeroCopyBuffer(std::size_t nbytes, bool portable, bool write_combined)
        : Owner(unwrap(cudyn::ZeroCopyBuffer<Byte>::allocate(nbytes, pinned_flags(portable, write_combined))),
                "ZeroCopyBuffer") {}
    MemoryDescription describe(const char* operation) const override {
        require_open(operation);
        MemoryDescription described;
        described.address = reinterpret_cast<std::uintptr_t>(buffer_.data());
        described.device_address = buffer_.device_address();
        described.nbytes = buffer_.size_bytes();
        described.device = {dlpack::CudaHost, 0};
        described.host_accessible = true;
        return described;
    }
};

class PyManagedBuffer final : public Owner<cudyn::ManagedBuffer<Byte>> {
public:
    PyManagedBuffer(std::size_t nbytes, bool attach_host)
        : Owner(unwrap(cudyn::ManagedBuffer<Byte>::allocate(
                    nbytes, attach_host ? cudyn::ManagedAttach::Host : cudyn::ManagedAttach::Global)),
                "ManagedBuffer") {}
    MemoryDescription describe(const char* operation) const override {
        require_open(operation);
        MemoryDescription described;
        described.address = buffer_.device_address();
        described.device_address = buffer_.device_address();
        described.nbytes = buffer_.size_bytes();
        described.device = {dlpack::CudaManaged, device_.of(buffer_.device_address())};
        described.host_accessible = true;
        return described;
    }
    cudyn::ManagedRange range(const char* operation) const {
        require_open(operation);
        return unwrap(buffer_.managed_range());
    }

private:
    LazyDevice device_;
};

// Runs a managed-range call with the GIL released (prefetches can wait).
template <typename Call>
void managed_call(const PyManagedBuffer& self, const char* operation, Call call) {
    const cudyn::ManagedRange range = self.range(operation);
    cudyn::Result<void> result = cudyn::ok();
    {
        py::gil_scoped_release unlocked;
        result = call(range);
    }
    unwrap(std::move(result));
}

// Managed memory for a prefetch plan: a ManagedBuffer, or a span or view of one.
cudyn::ManagedRange managed_range_of(py::handle memory, const char* operation) {
    if (!py::isinstance<Memory>(memory)) throw py::type_error(std::string(operation) + ": expected cudyn managed memory");
    const MemoryDescription described = memory.cast<const Memory&>().describe(operation);
    if (described.device.device_type != dlpack::CudaManaged)
        raise_invalid(std::string(operation) + ": the memory is not managed memory");
    return unwrap(cudyn::ManagedRange::over(described.device_address, described.nbytes));
}

// A plan and the memory objects it names, kept alive with it.
struct PyPrefetchPlan {
    cudyn::PrefetchPlan plan;
    std::vector<py::object> keep;
};

// Device memory on one side of a peer copy.
cudyn::detail::DeviceExtent peer_extent(const Memory& memory, const char* operation) {
    const MemoryDescription described = memory.describe(operation);
    if (described.device_address == 0) raise_invalid(std::string(operation) + ": host memory (copy_from copies it)");
    return {described.device_address, described.nbytes, 1};
}

}  // namespace

void bind_buffers(py::module_& module) {
    py::class_<PyDeviceBuffer, Memory>(module, "DeviceBuffer", R"doc(
Device memory (cuMemAlloc) in the current context, `nbytes` bytes.
DLPack device kCUDA; exports __cuda_array_interface__.)doc")
        .def(py::init<std::size_t>(), py::arg("nbytes"));

    auto pinned = py::class_<PyPinnedBuffer, Memory>(module, "PinnedBuffer", py::buffer_protocol(), R"doc(
Page-locked host memory (cuMemHostAlloc), `nbytes` bytes. Supports the buffer
protocol (memoryview, numpy.frombuffer); DLPack device kCUDAHost.)doc");
    pinned.def(py::init<std::size_t, bool, bool>(), py::arg("nbytes"), py::kw_only(), py::arg("portable") = false,
               py::arg("write_combined") = false);
    enable_host_buffer(pinned);

    auto zero_copy = py::class_<PyZeroCopyBuffer, Memory>(module, "ZeroCopyBuffer", py::buffer_protocol(), R"doc(
Pinned host memory mapped into the device's address space: the host reads
it (buffer protocol, DLPack kCUDAHost) and kernels read it in place
(__cuda_array_interface__ gives the device address).)doc");
    zero_copy.def(py::init<std::size_t, bool, bool>(), py::arg("nbytes"), py::kw_only(), py::arg("portable") = false,
                  py::arg("write_combined") = false);
    enable_host_buffer(zero_copy);

    auto managed = py::class_<PyManagedBuffer, Memory>(module, "ManagedBuffer", py::buffer_protocol(), R"doc(
Managed (unified) memory (cuMemAllocManaged), reachable from host and
devices; buffer protocol, DLPack kCUDAManaged, __cuda_array_interface__.
`attach_host=True` allocates it attached to the host (CU_MEM_ATTACH_HOST).)doc");
    managed.def(py::init<std::size_t, bool>(), py::arg("nbytes"), py::kw_only(), py::arg("attach_host") = false)
        .def(
            "prefetch_to",
            [](const PyManagedBuffer& self, const cudyn::Location& location, py::object stream) {
                const auto ref = stream_argument(stream);
                managed_call(self, "ManagedBuffer.prefetch_to", [&](const cudyn::ManagedRange& range) {
                    return ref ? range.prefetch_to(location, *ref) : range.prefetch_to(location);
                });
            },
            py::arg("location"), py::arg("stream") = py::none(),
            "Migrates the memory to `location` (cudyn.Location), on `stream` or the legacy default stream.")
        .def(
            "set_read_mostly",
            [](const PyManagedBuffer& self) {
                managed_call(self, "ManagedBuffer.set_read_mostly",
                             [](const cudyn::ManagedRange& range) { return range.set_read_mostly(); });
            },
            "Advice: mostly read, so devices may keep read-only copies.")
        .def(
            "set_preferred_location",
            [](const PyManagedBuffer& self, const cudyn::Location& location) {
                managed_call(self, "ManagedBuffer.set_preferred_location",
                             [&](const cudyn::ManagedRange& range) { return range.set_preferred_location(location); });
            },
            py::arg("location"), "Advice: where the memory should preferably live.")
        .def(
            "set_accessed_by",
            [](const PyManagedBuffer& self, const cudyn::Location& location) {
                managed_call(self, "ManagedBuffer.set_accessed_by",
                             [&](const cudyn::ManagedRange& range) { return range.set_accessed_by(location); });
            },
            py::arg("location"), "Advice: `location` will access the memory (kept mapped there).");
    enable_host_buffer(managed);

    py::class_<PyPrefetchPlan>(module, "PrefetchPlan", R"doc(
Prefetches (and discards) of managed memory issued together: one batch call
where the driver has it, one call per range otherwise. add() takes a
ManagedBuffer or a span of one.)doc")
        .def(py::init<>())
        .def(
            "add",
            [](PyPrefetchPlan& self, py::object memory, const cudyn::Location& location) {
                unwrap(self.plan.add(managed_range_of(memory, "PrefetchPlan.add"), location));
                self.keep.push_back(std::move(memory));
            },
            py::arg("memory"), py::arg("location"), "Prefetch `memory` to `location`.")
        .def(
            "add_discard",
            [](PyPrefetchPlan& self, py::object memory) {
                unwrap(self.plan.add_discard(managed_range_of(memory, "PrefetchPlan.add_discard")));
                self.keep.push_back(std::move(memory));
            },
            py::arg("memory"), "Discard `memory`'s contents (the driver may drop its pages).")
        .def(
            "add_discard_and_prefetch",
            [](PyPrefetchPlan& self, py::object memory, const cudyn::Location& location) {
                unwrap(self.plan.add_discard_and_prefetch(
                    managed_range_of(memory, "PrefetchPlan.add_discard_and_prefetch"), location));
                self.keep.push_back(std::move(memory));
            },
            py::arg("memory"), py::arg("location"))
        .def("__len__", [](const PyPrefetchPlan& self) { return self.plan.size(); })
        .def("clear",
             [](PyPrefetchPlan& self) {
                 self.plan.clear();
                 self.keep.clear();
             })
        .def(
            "execute",
            [](const PyPrefetchPlan& self, py::object stream) {
                const auto ref = stream_argument(stream);
                call_unlocked([&] { return ref ? self.plan.execute(*ref) : self.plan.execute(); });
            },
            py::arg("stream") = py::none(),
            "Issues the plan on `stream` (None: the legacy default stream, waited for; GIL released).");

    module.def("enable_peer_access",
               [](const cudyn::PrimaryContext& from, const cudyn::PrimaryContext& to) {
                   unwrap(cudyn::enable_peer_access(from, to));
               },
               py::arg("from_context"), py::arg("to_context"),
               "Lets `from_context` reach `to_context`'s memory (idempotent; NotSupported where the devices cannot).");
    module.def("disable_peer_access",
               [](const cudyn::PrimaryContext& from, const cudyn::PrimaryContext& to) {
                   unwrap(cudyn::disable_peer_access(from, to));
               },
               py::arg("from_context"), py::arg("to_context"));
    module.def(
        "copy_peer",
        [](const Memory& destination, const cudyn::PrimaryContext& destination_context, const Memory& source,
           const cudyn::PrimaryContext& source_context, py::object stream) {
            const auto to = peer_extent(destination, "copy_peer");
            const auto from = peer_extent(source, "copy_peer");
            const auto ref = stream_argument(stream);
            call_unlocked([&] {
                return cudyn::detail::copy_peer_bytes(to, destination_context.handle(), from, source_context.handle(),
                                                      ref ? &*ref : nullptr);
            });
        },
        py::arg("destination"), py::arg("destination_context"), py::arg("source"), py::arg("source_context"),
        py::arg("stream") = py::none(),
        "Copies device memory of one context to another's (cuMemcpyPeer); any cudyn memory, a Span over a "
        "torch tensor included. Without a stream it returns when done.");
}

}  // namespace cudyn_python
