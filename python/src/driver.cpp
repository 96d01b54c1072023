// The driver's state and the device layer: driver_status, load_report,
// Location, Device, PrimaryContext, Stream, Event, probe_topology.
#include "bindings.hpp"
#include "errors.hpp"
#include "memory_object.hpp"

#include <cudyn/core/location.hpp>
#include <cudyn/device/device.hpp>
#include <cudyn/device/event.hpp>
#include <cudyn/device/primary_context.hpp>
#include <cudyn/device/stream.hpp>
#include <cudyn/device/topology.hpp>
#include <cudyn/loader/loader.hpp>

#include <pybind11/stl.h>

#include <string>

namespace cudyn_python {
namespace {

// Runs a call that can wait for the device with the GIL released.
template <typename Call>
auto unlocked(Call call) {
    py::gil_scoped_release released;
    return call();
}

py::dict load_report_dict() {
    const cudyn::LoadReport& report = cudyn::load_report();
    py::list entries;
    for (const cudyn::EntryPointReport& entry : report.entry_points) {
        py::dict item;
        item["name"] = entry.name;
        item["version"] = entry.version;
        item["abi_symbol"] = entry.abi_symbol;
        item["required"] = entry.required;
        item["resolved_via"] = cudyn::to_string(entry.via);
        entries.append(item);
    }
    py::dict result;
    result["state"] = cudyn::to_string(report.state);
    result["requested_path"] = report.requested_path;
    result["library_path"] = report.library_path;
    result["message"] = report.message;
    result["driver_version"] = report.driver_version;
    result["init_result"] = static_cast<int>(report.init_result);
    result["init_result_name"] = cudyn::cuda_error_name(report.init_result);
    result["has_proc_address_v2"] = report.has_proc_address_v2;
    result["has_proc_address"] = report.has_proc_address;
    result["load_milliseconds"] = report.load_milliseconds;
    result["resolved_count"] = report.resolved_count();
    result["entry_points"] = entries;
    return result;
}

}  // namespace

void bind_driver(py::module_& module) {
    module.def(
        "driver_status", [] { unwrap(unlocked([] { return cudyn::driver_status(); })); },
        "Loads the driver if not yet loaded; returns None when it is usable, raises DriverNotFound, "
        "StubDriver, DriverInitFailed or DriverRefused otherwise.");
    module.def("load_report", &load_report_dict,
               "What the loader did, as a dict: state ('loaded', 'not_found', 'stub', 'init_failed', 'refused'), "
               "paths, driver_version, init_result, how each entry point resolved. Loads the driver first.");
    module.def(
        "set_driver_path",
        [](const std::string& path) {
            cudyn::LoaderOptions options;
            options.driver_path = path;
            unwrap(cudyn::set_loader_options(options));
        },
        py::arg("path"),
        "Opens this libcuda (an absolute path) instead of the system's at the first load; InvalidArgument once "
        "the driver is loaded. CUDYN_DRIVER_PATH in the environment does the same.");
    module.def("cuda_error_name", [](int result) { return cudyn::cuda_error_name(static_cast<CUresult>(result)); },
               py::arg("result"), "The name of a CUresult value, driver or not (\"CUDA_ERROR_OUT_OF_MEMORY\").");
}

void bind_device(py::module_& module) {
    py::class_<cudyn::Location>(module, "Location", "A device or host location for advice, prefetches and VMM.")
        .def_static("device", &cudyn::Location::device, py::arg("ordinal"))
        .def_static("host", &cudyn::Location::host)
        .def_static("host_numa", &cudyn::Location::host_numa, py::arg("node"))
        .def_static("host_numa_current", &cudyn::Location::host_numa_current)
        .def_property_readonly("is_host", &cudyn::Location::is_host)
        .def_property_readonly("id", &cudyn::Location::id)
        .def("__eq__", [](const cudyn::Location& a, const cudyn::Location& b) { return a == b; })
        .def("__hash__", [](const cudyn::Location& self) {
            return py::hash(py::make_tuple(static_cast<int>(self.kind()), self.id()));
        })
        .def("__repr__", [](const cudyn::Location& self) { return "cudyn.Location(" + self.describe() + ")"; });

    py::class_<cudyn::Device>(module, "Device", "A CUDA device by ordinal; Device(0) loads the driver.")
        .def(py::init([](int ordinal) { return unwrap(cudyn::Device::get(ordinal)); }), py::arg("ordinal"))
        .def_static("count", [] { return unwrap(cudyn::Device::count()); }, "How many devices the driver sees.")
        .def_static(
            "by_uuid",
            [](const std::string& uuid) {
                return unwrap(cudyn::Device::by_uuid(unwrap(cudyn::DeviceUuid::parse(uuid))));
            },
            py::arg("uuid"), "The device with this UUID (\"GPU-...\" or bare hex).")
        .def_static(
            "by_pci_bus_id", [](const std::string& bus_id) { return unwrap(cudyn::Device::by_pci_bus_id(bus_id)); },
            py::arg("bus_id"))
        .def_property_readonly("ordinal", &cudyn::Device::ordinal)
        .def_property_readonly("name", [](const cudyn::Device& self) { return unwrap(self.name()); })
        .def_property_readonly("total_memory", [](const cudyn::Device& self) { return unwrap(self.total_memory()); },
                               "Bytes of device memory.")
        .def_property_readonly(
            "compute_capability",
            [](const cudyn::Device& self) {
                const cudyn::ComputeCapability capability = unwrap(self.compute_capability());
                return py::make_tuple(capability.major, capability.minor);
            },
            "(major, minor).")
        .def_property_readonly("uuid", [](const cudyn::Device& self) { return unwrap(self.uuid()).to_string(); })
        .def_property_readonly("pci_bus_id",
                               [](const cudyn::Device& self) { return unwrap(self.pci_bus_id()).to_string(); })
        .def(
            "attribute",
            [](const cudyn::Device& self, int attribute) {
                return unwrap(self.attribute(static_cast<CUdevice_attribute>(attribute)));
            },
            py::arg("attribute"), "cuDeviceGetAttribute for a CUdevice_attribute value.")
        .def(
            "can_access_peer",
            [](const cudyn::Device& self, const cudyn::Device& peer) { return unwrap(self.can_access_peer(peer)); },
            py::arg("peer"))
        .def("__eq__", [](const cudyn::Device& a, const cudyn::Device& b) { return a.ordinal() == b.ordinal(); })
        .def("__hash__", [](const cudyn::Device& self) { return py::hash(py::int_(self.ordinal())); })
        .def("__repr__", [](const cudyn::Device& self) { return "cudyn.Device(" + std::to_string(self.ordinal()) + ")"; });

    module.def(
        "probe_topology",
        [] {
            const cudyn::Topology topology = unwrap(cudyn::probe_topology());
            py::list links;
            for (const cudyn::PeerLink& link : topology.links) {
                py::dict item;
                item["from"] = link.from;
                item["to"] = link.to;
                item["can_access_peer"] = link.can_access_peer;
                item["performance_rank"] = link.attributes.performance_rank;
                item["access_supported"] = link.attributes.access_supported;
                item["native_atomic_supported"] = link.attributes.native_atomic_supported;
                item["cuda_array_access_supported"] = link.attributes.cuda_array_access_supported;
                item["atomic_capabilities"] = link.atomic_capabilities;
                links.append(item);
            }
            py::dict result;
            result["device_count"] = topology.device_count;
            result["links"] = links;
            return result;
        },
        "Every ordered pair of devices: peer access and P2P attributes, as a dict.");

    py::class_<cudyn::PrimaryContext>(module, "PrimaryContext", R"doc(
A device's primary context, retained. PrimaryContext.activate(device) also
makes it current on the calling thread; release() (or the end of a with
block, or garbage collection) lets it go.)doc")
        .def_static("retain", [](const cudyn::Device& device) { return unwrap(cudyn::PrimaryContext::retain(device)); },
                    py::arg("device"))
        .def_static(
            "activate", [](const cudyn::Device& device) { return unwrap(cudyn::PrimaryContext::activate(device)); },
            py::arg("device"))
        .def("make_current", [](const cudyn::PrimaryContext& self) { unwrap(self.make_current()); },
             "Makes this context current on the calling thread.")
        .def("release", [](cudyn::PrimaryContext& self) { unwrap(self.release()); })
        .def_property_readonly("device", &cudyn::PrimaryContext::device)
        .def_property_readonly("handle",
                               [](const cudyn::PrimaryContext& self) { return reinterpret_cast<std::uintptr_t>(self.handle()); })
        .def("__enter__", [](py::object self) { return self; })
        .def("__exit__", [](cudyn::PrimaryContext& self, py::args) { unwrap(self.release()); });

    py::class_<cudyn::Stream> stream_class(module, "Stream", R"doc(
A stream created in the current context (Stream()), or a default stream
(Stream.legacy_default(), Stream.per_thread_default()). Context manager;
destroy() (or close()) reports errors.)doc");
    stream_class
        .def(py::init([](bool blocking) { return unwrap(cudyn::Stream::create(blocking)); }),
             py::arg("blocking") = false)
        .def_static("legacy_default", &cudyn::Stream::legacy_default)
        .def_static("per_thread_default", &cudyn::Stream::per_thread_default)
        .def("synchronize",
             [](const cudyn::Stream& self) {
                 require_live(self, "Stream.synchronize");
                 unwrap(unlocked([&] { return self.synchronize(); }));
             },
             "Waits (GIL released) until the stream's work is done.")
        .def("query",
             [](const cudyn::Stream& self) {
                 require_live(self, "Stream.query");
                 return unwrap(self.query());
             },
             "True when all the stream's work is done.")
        .def("destroy", [](cudyn::Stream& self) { unwrap(unlocked([&] { return self.destroy(); })); })
        .def("close", [](cudyn::Stream& self) { unwrap(unlocked([&] { return self.destroy(); })); })
        .def_property_readonly("closed", [](const cudyn::Stream& self) { return self.handle() == nullptr; })
        .def_property_readonly("handle", [](const cudyn::Stream& self) {
                 require_live(self, "Stream.handle");
                 return reinterpret_cast<std::uintptr_t>(self.handle());
             },
                               "The CUstream, as an int (what __dlpack__(stream=...) and CuPy/torch take).")
        .def_property_readonly("owned", &cudyn::Stream::owned)
        .def("__enter__", [](py::object self) { return self; })
        .def("__exit__", [](cudyn::Stream& self, py::args) { unwrap(unlocked([&] { return self.destroy(); })); });

    py::class_<cudyn::Event>(module, "Event", "A CUDA event in the current context (timing on by default).")
        .def(py::init([](bool timing, bool blocking_sync) {
                 cudyn::EventOptions options;
                 options.timing = timing;
                 options.blocking_sync = blocking_sync;
                 return unwrap(cudyn::Event::create(options));
             }),
             py::kw_only(), py::arg("timing") = true, py::arg("blocking_sync") = false)
        .def(
            "record",
            [](cudyn::Event& self, py::object stream) {
                const auto ref = stream_argument(stream);
                unwrap(self.record(ref ? *ref : cudyn::StreamRef(CU_STREAM_LEGACY)));
            },
            py::arg("stream") = py::none(), "Records the event on `stream` (None: the legacy default stream).")
        .def(
            "wait",
            [](const cudyn::Event& self, py::object stream) {
                const auto ref = stream_argument(stream);
                unwrap(self.wait(ref ? *ref : cudyn::StreamRef(CU_STREAM_LEGACY)));
            },
            py::arg("stream") = py::none(), "Makes `stream` wait for the event (on the device; returns at once).")
        .def("query", [](const cudyn::Event& self) { return unwrap(self.query()); })
        .def("synchronize", [](const cudyn::Event& self) { unwrap(unlocked([&] { return self.synchronize(); })); },
             "Waits (GIL released) until the event completes.")
        .def_static(
            "elapsed_ms",
            [](const cudyn::Event& start, const cudyn::Event& end) { return unwrap(cudyn::Event::elapsed_ms(start, end)); },
            py::arg("start"), py::arg("end"))
        .def("destroy", [](cudyn::Event& self) { unwrap(self.destroy()); })
        .def("close", [](cudyn::Event& self) { unwrap(self.destroy()); })
        .def_property_readonly("handle", [](const cudyn::Event& self) { return reinterpret_cast<std::uintptr_t>(self.handle()); })
        .def("__enter__", [](py::object self) { return self; })
        .def("__exit__", [](cudyn::Event& self, py::args) { unwrap(self.destroy()); });
}

}  // namespace cudyn_python
