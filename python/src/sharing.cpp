// Memory shared between processes: the descriptor channel (FdChannel,
// FdListener, PeerPolicy), one allocation (export_allocation /
// import_allocation) and a whole growing range (RangeExporter / import_range
// / ImportedRange.apply).
#include "bindings.hpp"
#include "owner.hpp"

#include <cudyn/channel/fd_channel.hpp>
#include <cudyn/channel/peer_policy.hpp>
#include <cudyn/share/allocation_sharing.hpp>
#include <cudyn/share/range_sharing.hpp>

#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

// A RangeDescriptor holds descriptors (move-only), but its std::vector
// member claims to be copyable: tell pybind11 to move it, never copy.
namespace pybind11::detail {
template <>
struct is_copy_constructible<cudyn::RangeDescriptor> : std::false_type {};
template <>
struct is_copy_assignable<cudyn::RangeDescriptor> : std::false_type {};
}  // namespace pybind11::detail

namespace cudyn_python {

template <>
struct Release<cudyn::ImportedAllocation> {
    static cudyn::Result<void> run(cudyn::ImportedAllocation& imported) { return imported.close(); }
};

template <>
struct Release<cudyn::ImportedRange> {
    static cudyn::Result<void> run(cudyn::ImportedRange& imported) { return imported.close(); }
};

namespace {

// A timeout in seconds from Python (None: the channel's default, 10 s).
std::chrono::milliseconds timeout_argument(py::handle seconds, const char* operation) {
    if (seconds.is_none()) return cudyn::kDefaultChannelTimeout;
    const double value = seconds.cast<double>();
    if (!(value >= 0) || !std::isfinite(value))
        raise_invalid(std::string(operation) + ": timeout must be a finite number of seconds >= 0");
    return std::chrono::milliseconds(static_cast<long long>(std::ceil(value * 1000.0)));
}

std::vector<cudyn::AccessGrant> access_argument(const std::vector<cudyn::Location>& locations) {
    std::vector<cudyn::AccessGrant> grants;
    for (const cudyn::Location& location : locations) grants.push_back(cudyn::AccessGrant{location});
    return grants;
}

class PyImportedAllocation final : public Owner<cudyn::ImportedAllocation> {
public:
    explicit PyImportedAllocation(cudyn::ImportedAllocation imported)
        : Owner(std::move(imported), "ImportedAllocation") {}
    MemoryDescription describe(const char* operation) const override {
        require_open(operation);
        return device_memory(buffer_.device_address(), buffer_.size_bytes(), device_.of(buffer_.device_address()));
    }

private:
    LazyDevice device_;
};

class PyImportedRange final : public Owner<cudyn::ImportedRange> {
public:
    explicit PyImportedRange(cudyn::ImportedRange imported)
        : Owner(std::move(imported), "ImportedRange") {}
    MemoryDescription describe(const char* operation) const override {
        require_open(operation);
        return device_memory(buffer_.device_address(), buffer_.suspended() ? 0 : buffer_.size_bytes(),
                             device_.of(buffer_.device_address()));
    }
    void apply(cudyn::RangeDescriptor& update) {
        require_open("ImportedRange.apply");
        // An update may unmap chunks that exports point into.
        require_no_exports("ImportedRange.apply");
        call_unlocked([&] { return buffer_.apply(std::move(update)); });
    }
    void suspend() {
        require_open("ImportedRange.suspend");
        require_no_exports("ImportedRange.suspend");
        call_unlocked([&] { return buffer_.suspend(); });
    }

private:
    LazyDevice device_;
};

}  // namespace

void bind_sharing(py::module_& module) {
    py::class_<cudyn::PeerPolicy>(module, "PeerPolicy", R"doc(
Who may be at the other end of a channel: the same user by default;
PeerPolicy.users([uid, ...]), PeerPolicy.any_user(); narrowed with
allow_uid, allow_gid, require_pid (each returns the policy).)doc")
        .def(py::init<>())
        .def_static("same_user", &cudyn::PeerPolicy::same_user)
        .def_static("users", &cudyn::PeerPolicy::users, py::arg("uids"))
        .def_static("any_user", &cudyn::PeerPolicy::any_user)
        .def("allow_uid", &cudyn::PeerPolicy::allow_uid, py::arg("uid"), py::return_value_policy::reference_internal)
        .def("allow_gid", &cudyn::PeerPolicy::allow_gid, py::arg("gid"), py::return_value_policy::reference_internal)
        .def("require_pid", &cudyn::PeerPolicy::require_pid, py::arg("pid"),
             py::return_value_policy::reference_internal)
        .def("__repr__", [](const cudyn::PeerPolicy& self) { return "cudyn.PeerPolicy(" + self.describe() + ")"; });

    py::class_<cudyn::FdChannel>(module, "FdChannel", R"doc(
A Unix-socket channel that carries descriptors (memory handles) between
processes: FdChannel.pair() for a child, FdChannel.connect(path) to an
FdListener, FdChannel.adopt(fd) for a socket inherited from a parent. Every
receive waits with the GIL released, up to `timeout` seconds (Timeout).)doc")
        .def_static(
            "pair",
            [] {
                auto ends = unwrap(cudyn::FdChannel::pair());
                return py::make_tuple(py::cast(std::move(ends.first)), py::cast(std::move(ends.second)));
            },
            "Two connected channels (give one end's fileno() to a child, e.g. subprocess pass_fds).")
        .def_static(
            "connect",
            [](const std::string& path, py::object timeout, const cudyn::PeerPolicy& listener) {
                const auto wait = timeout_argument(timeout, "FdChannel.connect");
                return call_unlocked([&] { return cudyn::FdChannel::connect(path, wait, listener); });
            },
            py::arg("path"), py::arg("timeout") = py::none(), py::arg("listener") = cudyn::PeerPolicy(),
            "Connects to an FdListener at `path` (an @name is an abstract socket), checking the listener "
            "against `listener`.")
        .def_static(
            "adopt", [](int fd) { return unwrap(cudyn::FdChannel::adopt(cudyn::FileDescriptor(fd))); }, py::arg("fd"),
            "Takes ownership of a connected socket descriptor (closed with the channel).")
        .def("fileno", [](const cudyn::FdChannel& self) { return self.socket().get(); })
        .def(
            "send",
            [](cudyn::FdChannel& self, std::uint32_t tag, py::bytes payload, py::object timeout) {
                const std::string bytes = payload;
                const auto wait = timeout_argument(timeout, "FdChannel.send");
                call_unlocked([&] { return self.send(tag, bytes.data(), bytes.size(), -1, wait); });
            },
            py::arg("tag"), py::arg("payload"), py::arg("timeout") = py::none(),
            "Sends a tagged message of bytes (at most 64 KiB).")
        .def(
            "receive",
            [](cudyn::FdChannel& self, std::uint32_t tag, py::object timeout) {
                const auto wait = timeout_argument(timeout, "FdChannel.receive");
                const cudyn::ChannelMessage message = call_unlocked([&] { return self.receive(tag, wait); });
                return py::bytes(reinterpret_cast<const char*>(message.payload.data()), message.payload.size());
            },
            py::arg("tag"), py::arg("timeout") = py::none(),
            "Receives the next message, which must carry `tag` (InvalidArgument otherwise); returns its bytes.")
        .def(
            "peer",
            [](const cudyn::FdChannel& self) {
                const cudyn::PeerCredentials peer = unwrap(self.peer());
                py::dict result;
                result["pid"] = peer.pid;
                result["uid"] = peer.uid;
                result["gid"] = peer.gid;
                return result;
            },
            "The other end's pid, uid and gid (SO_PEERCRED).")
        .def("close", [](cudyn::FdChannel& self) { unwrap(self.close()); })
        .def_property_readonly("closed", &cudyn::FdChannel::empty)
        .def("__enter__", [](py::object self) { return self; })
        .def("__exit__", [](cudyn::FdChannel& self, py::args) { unwrap(self.close()); });

    py::class_<cudyn::FdListener>(module, "FdListener", R"doc(
A listening socket at `path` (an @name is an abstract socket) that accepts
channels from peers `peers` allows; refused peers never get a channel.)doc")
        .def(py::init([](const std::string& path, const cudyn::PeerPolicy& peers) {
                 cudyn::ListenOptions options;
                 options.peers = peers;
                 return unwrap(cudyn::FdListener::listen(path, std::move(options)));
             }),
             py::arg("path"), py::arg("peers") = cudyn::PeerPolicy())
        .def(
            "accept",
            [](cudyn::FdListener& self, py::object timeout) {
                const auto wait = timeout_argument(timeout, "FdListener.accept");
                return call_unlocked([&] { return self.accept(wait); });
            },
            py::arg("timeout") = py::none())
        .def_property_readonly("path", &cudyn::FdListener::path)
        .def("close", [](cudyn::FdListener& self) { self = cudyn::FdListener(); })
        .def("__enter__", [](py::object self) { return self; })
        .def("__exit__", [](cudyn::FdListener& self, py::args) { self = cudyn::FdListener(); });

    py::class_<cudyn::AllocationDescriptor>(module, "AllocationDescriptor", R"doc(
What export_allocation made: enough for another process to import the
memory (send it with send_descriptor).)doc")
        .def_property_readonly("kind", [](const cudyn::AllocationDescriptor& self) { return cudyn::to_string(self.kind()); })
        .def_property_readonly("nbytes", &cudyn::AllocationDescriptor::size_bytes)
        .def_property_readonly("offset", &cudyn::AllocationDescriptor::offset_bytes)
        .def_property_readonly("allocation_nbytes", &cudyn::AllocationDescriptor::allocation_size_bytes)
        .def_property_readonly("exporter_pid", &cudyn::AllocationDescriptor::exporter_pid);

    module.def(
        "export_allocation",
        [](py::handle memory, py::object nbytes) {
            if (py::isinstance<Memory>(memory)) {
                const MemoryDescription described = memory.cast<const Memory&>().describe("export_allocation");
                if (described.device_address == 0) raise_invalid("export_allocation: host memory cannot be exported");
                const std::size_t size = nbytes.is_none() ? described.nbytes : nbytes.cast<std::size_t>();
                return unwrap(cudyn::export_allocation(described.device_address, size));
            }
            const auto address = static_cast<CUdeviceptr>(memory.cast<std::uintptr_t>());
            return unwrap(nbytes.is_none() ? cudyn::export_allocation(address)
                                           : cudyn::export_allocation(address, nbytes.cast<std::size_t>()));
        },
        py::arg("memory"), py::arg("nbytes") = py::none(),
        "A descriptor of device memory (a cudyn memory object: a buffer, a GrowableBuffer, a Span over a torch "
        "tensor; or a device address) for another process: cuMemAlloc memory, VMM memory made shareable, or "
        "memory of a shareable pool.");
    module.def(
        "import_allocation",
        [](const cudyn::AllocationDescriptor& descriptor) {
            return std::make_unique<PyImportedAllocation>(
                call_unlocked([&] { return cudyn::import_allocation(descriptor); }));
        },
        py::arg("descriptor"), "Maps another process's exported memory here (an ImportedAllocation).");
    py::class_<PyImportedAllocation, Memory>(module, "ImportedAllocation",
                                             "Another process's memory, mapped here (import_allocation).")
        .def_property_readonly("kind", [](const PyImportedAllocation& self) { return cudyn::to_string(self.buffer().kind()); });

    py::class_<cudyn::RangeDescriptor>(module, "RangeDescriptor", R"doc(
A whole range's layout (RangeExporter.describe) or an update to it
(RangeExporter.update). import_range and ImportedRange.apply consume it.)doc")
        .def_property_readonly("generation", [](const cudyn::RangeDescriptor& self) { return self.generation; })
        .def_property_readonly("is_update", &cudyn::RangeDescriptor::is_update)
        .def_property_readonly("reserved_bytes", [](const cudyn::RangeDescriptor& self) { return self.reserved_bytes; })
        .def_property_readonly("chunk_count", [](const cudyn::RangeDescriptor& self) { return self.chunks.size(); });

    py::class_<cudyn::RangeExporter>(module, "RangeExporter", R"doc(
Publishes a shareable GrowableBuffer's whole range to other processes and
follows it as it grows: describe() gives the layout, update() what changed
since the last one.)doc")
        .def(py::init([](py::handle growable) { return unwrap(cudyn::RangeExporter::create(growable_buffer_of(growable, "RangeExporter"))); }),
             py::arg("buffer"), py::keep_alive<1, 2>())
        .def("describe", [](const cudyn::RangeExporter& self) { return unwrap(self.describe()); })
        .def("update", [](cudyn::RangeExporter& self) { return unwrap(self.update()); })
        .def_property_readonly("generation", &cudyn::RangeExporter::generation)
        .def_property_readonly("nbytes", &cudyn::RangeExporter::size_bytes)
        .def_property_readonly("chunk_count", &cudyn::RangeExporter::chunk_count);

    module.def(
        "import_range",
        [](cudyn::RangeDescriptor& descriptor, const std::vector<cudyn::Location>& access) {
            const auto grants = access_argument(access);
            return std::make_unique<PyImportedRange>(
                call_unlocked([&] { return cudyn::import_range(std::move(descriptor), grants); }));
        },
        py::arg("descriptor"), py::arg("access") = std::vector<cudyn::Location>{},
        "Maps another process's range here at one address (an ImportedRange); `access`: the devices "
        "granted read-write access (default: the chunks' own). Consumes the descriptor.");
    py::class_<PyImportedRange, Memory>(module, "ImportedRange", R"doc(
Another process's growing range, mapped here. apply(update) follows it as it
grows or shrinks (the address stays); nbytes is what is mapped.)doc")
        .def("apply", &PyImportedRange::apply, py::arg("update"), "Applies an update (consumes it).")
        .def("suspend", &PyImportedRange::suspend, "Unmaps the range, keeping what resume() needs.")
        .def("resume", [](PyImportedRange& self) {
            self.require_open("ImportedRange.resume");
            call_unlocked([&] { return self.buffer().resume(); });
        })
        .def_property_readonly("generation", [](const PyImportedRange& self) { return self.buffer().generation(); })
        .def_property_readonly("reserved_bytes", [](const PyImportedRange& self) { return self.buffer().reserved_bytes(); })
        .def_property_readonly("suspended", [](const PyImportedRange& self) { return self.buffer().suspended(); });

    module.def(
        "send_descriptor",
        [](cudyn::FdChannel& channel, const cudyn::AllocationDescriptor& descriptor, py::object timeout) {
            const auto wait = timeout_argument(timeout, "send_descriptor");
            call_unlocked([&] { return cudyn::send_descriptor(channel, descriptor, wait); });
        },
        py::arg("channel"), py::arg("descriptor"), py::arg("timeout") = py::none());
    module.def(
        "send_descriptor",
        [](cudyn::FdChannel& channel, const cudyn::RangeDescriptor& descriptor, py::object timeout) {
            const auto wait = timeout_argument(timeout, "send_descriptor");
            call_unlocked([&] { return cudyn::send_descriptor(channel, descriptor, wait); });
        },
        py::arg("channel"), py::arg("descriptor"), py::arg("timeout") = py::none(),
        "Sends an AllocationDescriptor or a RangeDescriptor (with its descriptors) over a channel.");
    module.def(
        "receive_allocation",
        [](cudyn::FdChannel& channel, py::object timeout) {
            const auto wait = timeout_argument(timeout, "receive_allocation");
            return call_unlocked([&] { return cudyn::receive_allocation(channel, wait); });
        },
        py::arg("channel"), py::arg("timeout") = py::none(), "Receives an AllocationDescriptor (GIL released).");
    module.def(
        "receive_range",
        [](cudyn::FdChannel& channel, py::object timeout) {
            const auto wait = timeout_argument(timeout, "receive_range");
            return call_unlocked([&] { return cudyn::receive_range(channel, wait); });
        },
        py::arg("channel"), py::arg("timeout") = py::none(), "Receives a RangeDescriptor (GIL released).");
}

}  // namespace cudyn_python
