// cudyn-info — what driver is here, what it supports, which entry points resolved.
//
//   cudyn-info                 human-readable report
//   cudyn-info --json          one JSON object (state, library_path, driver_version, devices, nvml, peers, entry_points)
//   cudyn-info --require-gpu   exit 1 unless a usable device was found (a node health check)
//   cudyn-info --require T,..  exit 1 without a usable device, exit 3 unless every device
//                              passed those capability trials,
//                              exit 4 unless those topology conditions hold
//   cudyn-info --schema        the JSON Schema of --json's output
//
// It exits 0 whenever it could report, even when no driver is installed
// (exit codes: docs/guide/loader.md, "Node health checks").
#include "cudyn/core/version.hpp"
#include "cudyn/device/capability_fingerprint.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/device/peer_access.hpp"
#include "cudyn/device/topology.hpp"
#include "cudyn/loader/loader.hpp"
#include "cudyn/nvml/gpu_fabric.hpp"
#include "cudyn/nvml/nvlink.hpp"
#include "cudyn/nvml/nvml_library.hpp"
#include "info_schema.hpp"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <sys/stat.h>
#ifdef __linux__
#include <unistd.h>
#endif

namespace {

struct DeviceReport {
    int ordinal = 0;
    std::string name;
    std::size_t total_memory = 0;
    cudyn::ComputeCapability compute_capability;
    cudyn::DeviceCapabilities capabilities;
    std::string error;  // set when a query failed
    bool fingerprinted = false;
    cudyn::CapabilityFingerprint fingerprint;
    std::string fingerprint_error;  // set when the trials could not start
    std::string uuid;               // "GPU-...", empty when the query failed
    std::string pci_bus_id;         // "0000:18:00.0", empty when the query failed
    bool has_fabric = false;        // NVML answered for the fabric
    cudyn::GpuFabric fabric;
    std::string fabric_error;       // why not, when NVML is loaded
    bool has_nvlinks = false;
    std::vector<cudyn::NvLinkState> nvlinks;
    std::string nvlink_error;
};

// Exit codes, documented in docs/guide/loader.md ("Node health checks"). No
// usable device is exit 1 for --require-gpu and --require alike: there is
// nothing to try a trial or condition on.
enum ExitCode { kExitOk = 0, kExitNoGpu = 1, kExitUsage = 2, kExitTrialFailed = 3, kExitConditionFailed = 4 };

// The loader calls cuInit once it opened a library with cuInit and
// cuDriverGetVersion; those states are the ones it reaches only after.
bool init_ran(const cudyn::LoadReport& report) {
    return report.state == cudyn::LoadState::Loaded || report.state == cudyn::LoadState::Stub ||
           report.state == cudyn::LoadState::InitFailed;
}

// Which physical device, and (where NVML is loaded) its fabric and links.
void collect_identity(const cudyn::Device& device, DeviceReport& report) {
    auto uuid = device.uuid();
    auto bus = device.pci_bus_id();
    if (bus) report.pci_bus_id = bus->to_string();
    if (!uuid) return;
    report.uuid = uuid->to_string();
    if (cudyn::nvml_report().state != cudyn::NvmlState::Loaded) return;
    auto fabric = cudyn::gpu_fabric(*uuid);
    report.has_fabric = fabric.has_value();
    if (fabric)
        report.fabric = *fabric;
    else
        report.fabric_error = fabric.error().describe();
    auto links = cudyn::nvlink_states(*uuid);
    report.has_nvlinks = links.has_value();
    if (links)
        report.nvlinks = *links;
    else
        report.nvlink_error = links.error().describe();
}

std::vector<DeviceReport> collect_devices(std::string& error, bool trials) {
    std::vector<DeviceReport> devices;
    if (auto status = cudyn::driver_status(); !status) return devices;
    auto count = cudyn::Device::count();
    if (!count) {
        error = count.error().describe();
        return devices;
    }
    for (int ordinal = 0; ordinal < *count; ++ordinal) {
        DeviceReport report;
        report.ordinal = ordinal;
        auto device = cudyn::Device::get(ordinal);
        if (!device) {
            report.error = device.error().describe();
            devices.push_back(report);
            continue;
        }
        auto name = device->name();
        auto memory = device->total_memory();
        auto cc = device->compute_capability();
        auto caps = cudyn::probe_capabilities(*device);
        if (name) report.name = *name;
        if (memory) report.total_memory = *memory;
        if (cc) report.compute_capability = *cc;
        if (caps) report.capabilities = *caps;
        for (const cudyn::Error* failure : {name ? nullptr : &name.error(), memory ? nullptr : &memory.error(),
                                            cc ? nullptr : &cc.error(), caps ? nullptr : &caps.error()})
            if (failure != nullptr && report.error.empty()) report.error = failure->describe();
        collect_identity(*device, report);
        if (trials) {
            auto fingerprint = cudyn::fingerprint_device(*device);
            report.fingerprinted = fingerprint.has_value();
            if (fingerprint)
                report.fingerprint = *fingerprint;
            else
                report.fingerprint_error = fingerprint.error().describe();
        }
        devices.push_back(report);
    }
    return devices;
}

// Every ordered pair of devices (none without a driver or below two devices).
cudyn::Topology collect_topology(const std::vector<DeviceReport>& devices, std::string& error) {
    if (devices.size() < 2) return {};
    auto topology = cudyn::probe_topology();
    if (topology) return *topology;
    error = topology.error().describe();
    return {};
}

std::string json_string(const std::string& text) {
    std::string out = "\"";
    for (const char c : text) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char escaped[8];
                    std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
                    out += escaped;
                } else {
                    out += c;
                }
        }
    }
    return out + "\"";
}

const char* json_bool(bool value) { return value ? "true" : "false"; }

std::string ptx_isa_text(int isa) { return isa == 0 ? "" : std::to_string(isa / 10) + "." + std::to_string(isa % 10); }

void print_json_fingerprint(const DeviceReport& d) {
    if (!d.fingerprint_error.empty()) {
        std::printf(", \"fingerprint_error\": %s", json_string(d.fingerprint_error).c_str());
        return;
    }
    if (!d.fingerprinted) return;
    const cudyn::CapabilityFingerprint& f = d.fingerprint;
    std::printf(",\n     \"fingerprint\": {\"version\": %d, \"newest_ptx_isa\": %s, \"trials\": {",
                cudyn::CapabilityFingerprint::kVersion, json_string(ptx_isa_text(f.newest_ptx_isa)).c_str());
    for (std::size_t t = 0; t < cudyn::capability_trial_count; ++t) {
        const cudyn::TrialResult& r = f.*cudyn::capability_trial_list[t].field;
        std::printf("%s\n       \"%s\": {\"outcome\": \"%s\", \"driver_result\": %s, \"ms\": %.3f, \"detail\": %s}",
                    t ? "," : "", cudyn::capability_trial_list[t].name, cudyn::to_string(r.outcome),
                    json_string(cudyn::cuda_error_name(r.driver_result)).c_str(), r.milliseconds,
                    json_string(r.detail).c_str());
    }
    std::printf("}}");
}

std::string json_uint_list(const std::vector<unsigned int>& values) {
    std::string out = "[";
    for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
    return out + "]";
}

void print_json_nvml_device(const DeviceReport& d) {
    if (!d.uuid.empty()) std::printf(", \"uuid\": %s", json_string(d.uuid).c_str());
    if (!d.pci_bus_id.empty()) std::printf(", \"pci_bus_id\": %s", json_string(d.pci_bus_id).c_str());
    if (d.has_fabric) {
        const cudyn::GpuFabric& f = d.fabric;
        std::printf(",\n     \"fabric\": {\"state\": \"%s\", \"status\": %d, \"cluster_uuid\": %s, \"clique_id\": %u, "
                    "\"health_mask\": %u, \"healthy\": %s, \"problems\": %s}",
                    cudyn::to_string(f.state), f.status, json_string(f.cluster_uuid.to_string()).c_str(), f.clique_id,
                    f.health_mask, json_bool(f.healthy()), json_string(f.problems()).c_str());
    }
    if (!d.fabric_error.empty()) std::printf(", \"fabric_error\": %s", json_string(d.fabric_error).c_str());
    if (d.has_nvlinks) {
        std::printf(",\n     \"nvlinks\": [");
        for (std::size_t i = 0; i < d.nvlinks.size(); ++i)
            std::printf("%s{\"link\": %u, \"active\": %s}", i ? ", " : "", d.nvlinks[i].link,
                        json_bool(d.nvlinks[i].active));
        std::printf("]");
    }
    if (!d.nvlink_error.empty()) std::printf(", \"nvlink_error\": %s", json_string(d.nvlink_error).c_str());
}

void print_json_nvml(const cudyn::NvmlReport& nvml) {
    std::printf("  \"nvml\": {\"state\": \"%s\", \"message\": %s, \"requested_path\": %s, \"library_path\": %s, "
                "\"kernel_driver_version\": %s, \"cuda_driver_version\": %d},\n",
                cudyn::to_string(nvml.state), json_string(nvml.message).c_str(),
                json_string(nvml.requested_path).c_str(), json_string(nvml.library_path).c_str(),
                json_string(nvml.kernel_driver_version).c_str(), nvml.cuda_driver_version);
}

void print_json(const cudyn::LoadReport& report, const std::vector<DeviceReport>& devices,
                const cudyn::Topology& topology, const std::string& topology_error, const std::string& device_error) {
    std::printf("{\n  \"schema_version\": %d,\n", cudyn::tools::kInfoSchemaVersion);
    std::printf("  \"state\": %s,\n", json_string(cudyn::to_string(report.state)).c_str());
    std::printf("  \"message\": %s,\n", json_string(report.message).c_str());
    std::printf("  \"requested_path\": %s,\n", json_string(report.requested_path).c_str());
    std::printf("  \"library_path\": %s,\n", json_string(report.library_path).c_str());
    std::printf("  \"driver_version\": %d,\n", report.driver_version);
    if (init_ran(report)) {
        std::printf("  \"init_result\": %d,\n", static_cast<int>(report.init_result));
        std::printf("  \"init_result_name\": %s,\n", json_string(cudyn::cuda_error_name(report.init_result)).c_str());
    } else {
        std::printf("  \"init_result\": null,\n  \"init_result_name\": null,\n");
    }
    std::printf("  \"load_ms\": %.3f,\n", report.load_milliseconds);
    std::printf("  \"device_error\": %s,\n", json_string(device_error).c_str());
    std::printf("  \"devices\": [");
    for (std::size_t i = 0; i < devices.size(); ++i) {
        const DeviceReport& d = devices[i];
        std::printf("%s\n    {\"ordinal\": %d, \"name\": %s, \"total_memory\": %zu, ", i ? "," : "", d.ordinal,
                    json_string(d.name).c_str(), d.total_memory);
        std::printf("\"compute_capability\": \"%d.%d\", ", d.compute_capability.major, d.compute_capability.minor);
        if (!d.error.empty()) std::printf("\"error\": %s, ", json_string(d.error).c_str());
        std::printf("\"capabilities\": {");
        // Every row of device_capabilities.def, keyed by its field name.
        for (std::size_t c = 0; c < cudyn::device_capability_count; ++c)
            std::printf("%s\"%s\": %s", c ? ", " : "", cudyn::device_capability_list[c].name,
                        json_bool(d.capabilities.*cudyn::device_capability_list[c].field));
        std::printf("}");
        print_json_fingerprint(d);
        print_json_nvml_device(d);
        std::printf("}");
    }
    std::printf("%s],\n", devices.empty() ? "" : "\n  ");
    if (!topology_error.empty()) std::printf("  \"topology_error\": %s,\n", json_string(topology_error).c_str());
    print_json_nvml(cudyn::nvml_report());
    std::printf("  \"peers\": [");
    for (std::size_t i = 0; i < topology.links.size(); ++i) {
        const cudyn::PeerLink& p = topology.links[i];
        std::printf("%s\n    {\"from\": %d, \"to\": %d, \"can_access_peer\": %s, \"performance_rank\": %d, "
                    "\"access_supported\": %s, \"native_atomic_supported\": %s, \"cuda_array_access_supported\": %s",
                    i ? "," : "", p.from, p.to, json_bool(p.can_access_peer), p.attributes.performance_rank,
                    json_bool(p.attributes.access_supported), json_bool(p.attributes.native_atomic_supported),
                    json_bool(p.attributes.cuda_array_access_supported));
        if (!p.atomic_capabilities.empty())
            std::printf(", \"atomic_capabilities\": %s", json_uint_list(p.atomic_capabilities).c_str());
        std::printf("}");
    }
    std::printf("%s],\n  \"entry_points\": [", topology.links.empty() ? "" : "\n  ");
    for (std::size_t i = 0; i < report.entry_points.size(); ++i) {
        const cudyn::EntryPointReport& e = report.entry_points[i];
        std::printf("%s\n    {\"name\": \"%s\", \"abi_symbol\": \"%s\", \"version\": %d, \"required\": %s, "
                    "\"resolved\": %s, \"via\": \"%s\"}",
                    i ? "," : "", e.name, e.abi_symbol, e.version, json_bool(e.required), json_bool(e.resolved()),
                    cudyn::to_string(e.via));
    }
    std::printf("%s]\n}\n", report.entry_points.empty() ? "" : "\n  ");
}

std::string format_bytes(std::size_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
    return text;
}

void print_next_steps(const cudyn::LoadReport& report, const std::vector<DeviceReport>& devices);

// The build in libcuda's file name ("libcuda.so.580.65.06" -> "580.65.06"), empty when it has none.
std::string libcuda_build(const std::string& path) {
    const std::string marker = "libcuda.so.";
    const std::size_t at = path.rfind(marker);
    if (at == std::string::npos) return {};
    const std::string build = path.substr(at + marker.size());
    return build.find('.') == std::string::npos ? std::string() : build;
}

// NVML and what it says of the kernel module next to the libcuda opened.
void print_human_nvml(const cudyn::LoadReport& report) {
    const cudyn::NvmlReport& nvml = cudyn::nvml_report();
    std::printf("\n  NVML            %s", cudyn::to_string(nvml.state));
    if (nvml.state != cudyn::NvmlState::Loaded) {
        std::printf(" (%s; fabric and NVLink states unknown)\n", nvml.message.c_str());
        return;
    }
    std::printf(", %s\n", nvml.library_path.c_str());
    if (nvml.kernel_driver_version.empty()) return;
    std::printf("  kernel module   %s\n", nvml.kernel_driver_version.c_str());
    const std::string build = libcuda_build(report.library_path);
    if (!build.empty() && build != nvml.kernel_driver_version)
        std::printf("  note            libcuda %s is not the kernel module's %s: a forward-compatibility libcuda; "
                    "where the pair is unsupported, cuInit answers CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803) or "
                    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804)\n",
                    build.c_str(), nvml.kernel_driver_version.c_str());
}

void print_human_identity(const DeviceReport& d) {
    std::printf("    %-36s %s\n", "uuid", d.uuid.empty() ? "unknown" : d.uuid.c_str());
    std::printf("    %-36s %s\n", "pci bus id", d.pci_bus_id.empty() ? "unknown" : d.pci_bus_id.c_str());
    if (d.has_fabric) {
        const cudyn::GpuFabric& f = d.fabric;
        std::printf("    %-36s %s, status %d, cluster %s, clique %u, health mask 0x%x: %s\n", "fabric",
                    cudyn::to_string(f.state), f.status, f.cluster_uuid.to_string().c_str() + 4, f.clique_id,
                    f.health_mask, f.healthy() ? "healthy" : f.problems().c_str());
    } else if (!d.fabric_error.empty()) {
        std::printf("    %-36s %s\n", "fabric", d.fabric_error.c_str());
    }
    if (d.has_nvlinks) {
        std::size_t active = 0;
        std::string down;
        for (const cudyn::NvLinkState& l : d.nvlinks) {
            if (l.active) ++active;
            else down += (down.empty() ? " (down:" : ",") + std::string(" ") + std::to_string(l.link);
        }
        std::printf("    %-36s %zu of %zu active%s%s\n", "nvlinks", active, d.nvlinks.size(), down.c_str(),
                    down.empty() ? "" : ")");
    } else if (!d.nvlink_error.empty()) {
        std::printf("    %-36s %s\n", "nvlinks", d.nvlink_error.c_str());
    }
}

// Rows reach columns, as nvidia-smi topo -m is read: "P0" peer access with
// performance rank 0, "A" native atomics, "-" no peer access.
void print_human_matrix(const cudyn::Topology& topology) {
    std::printf("\n  topology (row reaches column; P<rank>: peer access, lower rank a faster link; A: native atomics; "
                "-: no peer access)\n        ");
    for (int to = 0; to < topology.device_count; ++to) std::printf(" %-7s", ("GPU" + std::to_string(to)).c_str());
    std::printf("\n");
    for (int from = 0; from < topology.device_count; ++from) {
        std::printf("    %-4s", ("GPU" + std::to_string(from)).c_str());
        for (int to = 0; to < topology.device_count; ++to) {
            const cudyn::PeerLink* l = topology.link(from, to);
            std::string cell = "X";
            if (l != nullptr)
                cell = l->can_access_peer ? "P" + std::to_string(l->attributes.performance_rank) +
                                                (l->attributes.native_atomic_supported ? " A" : "")
                                          : "-";
            std::printf(" %-7s", cell.c_str());
        }
        std::printf("\n");
    }
}

void print_human(const cudyn::LoadReport& report, const std::vector<DeviceReport>& devices,
                 const cudyn::Topology& topology, const std::string& topology_error, const std::string& device_error,
                 bool verbose) {
    std::printf("cudyn-info\n");
    std::printf("  state           %s\n", cudyn::to_string(report.state));
    if (!report.message.empty()) std::printf("  reason          %s\n", report.message.c_str());
    std::printf("  requested       %s\n", report.requested_path.c_str());
    if (!report.library_path.empty()) std::printf("  opened          %s\n", report.library_path.c_str());
    if (report.driver_version != 0)
        std::printf("  driver version  %d.%d (%d)\n", report.driver_version / 1000, report.driver_version % 1000 / 10,
                    report.driver_version);
    if (init_ran(report))
        std::printf("  cuInit          %s (%d)\n", cudyn::cuda_error_name(report.init_result),
                    static_cast<int>(report.init_result));
    if (!report.library_path.empty()) std::printf("  load time       %.3f ms\n", report.load_milliseconds);
    if (!device_error.empty()) std::printf("  devices         error: %s\n", device_error.c_str());
    for (const DeviceReport& d : devices) {
        std::printf("\n  device %d: %s, compute %d.%d, %s\n", d.ordinal, d.name.c_str(), d.compute_capability.major,
                    d.compute_capability.minor, format_bytes(d.total_memory).c_str());
        if (!d.error.empty()) std::printf("    error: %s\n", d.error.c_str());
        print_human_identity(d);
        for (const cudyn::DeviceCapabilityInfo& c : cudyn::device_capability_list)
            std::printf("    %-36s %-3s  %s\n", c.name, d.capabilities.*c.field ? "yes" : "no", c.description);
        if (!d.fingerprint_error.empty()) std::printf("    trials: could not run (%s)\n", d.fingerprint_error.c_str());
        if (!d.fingerprinted) continue;
        std::printf("    trials (what the driver really did; --no-trials skips them):\n");
        for (const cudyn::CapabilityTrialInfo& t : cudyn::capability_trial_list) {
            const cudyn::TrialResult& r = d.fingerprint.*t.field;
            std::printf("    %-36s %-9s %8.2f ms  %s\n", t.name, cudyn::to_string(r.outcome), r.milliseconds,
                        r.detail.empty() ? t.description : r.detail.c_str());
        }
        if (d.fingerprint.newest_ptx_isa != 0)
            std::printf("    %-36s %s\n", "newest PTX ISA the JIT loads", ptx_isa_text(d.fingerprint.newest_ptx_isa).c_str());
    }
    if (!topology_error.empty()) std::printf("\n  topology        error: %s\n", topology_error.c_str());
    if (!topology.links.empty()) {
        print_human_matrix(topology);
        std::printf("\n  peers (from -> to: cuDeviceCanAccessPeer, then cuDeviceGetP2PAttribute)\n");
        std::printf("    %-10s %-11s %-5s %-15s %-12s %s\n", "pair", "can access", "rank", "access (attr)",
                    "atomics", "arrays");
        for (const cudyn::PeerLink& p : topology.links) {
            const std::string pair = std::to_string(p.from) + " -> " + std::to_string(p.to);
            std::printf("    %-10s %-11s %-5d %-15s %-12s %s\n", pair.c_str(), p.can_access_peer ? "yes" : "no",
                        p.attributes.performance_rank, p.attributes.access_supported ? "yes" : "no",
                        p.attributes.native_atomic_supported ? "yes" : "no",
                        p.attributes.cuda_array_access_supported ? "yes" : "no");
        }
    }
    if (report.state == cudyn::LoadState::Loaded) print_human_nvml(report);
    print_next_steps(report, devices);
    // Without an opened library every entry is trivially unresolved.
    if (report.library_path.empty() && !verbose) return;
    std::size_t resolved = report.resolved_count();
    std::printf("\n  entry points    %zu of %zu resolved", resolved, report.entry_points.size());
    const auto missing = report.missing_required();
    if (!missing.empty()) std::printf(", %zu REQUIRED missing", missing.size());
    std::printf("%s\n", verbose ? "" : " (--verbose lists them)");
    for (const cudyn::EntryPointReport& e : report.entry_points) {
        if (!verbose && e.resolved()) continue;
        std::printf("    %-40s v%-6d %-9s %s\n", e.abi_symbol, e.version, e.required ? "required" : "optional",
                    cudyn::to_string(e.via));
    }
}

// A path without its "dir/.." and "." parts, for a command that reads well.
std::string normalized(const std::string& path) {
    std::vector<std::string> parts;
    std::size_t start = 1;
    while (start <= path.size()) {
        std::size_t end = path.find('/', start);
        if (end == std::string::npos) end = path.size();
        const std::string part = path.substr(start, end - start);
        if (part == "..") {
            if (!parts.empty()) parts.pop_back();
        } else if (!part.empty() && part != ".") {
            parts.push_back(part);
        }
        start = end + 1;
    }
    std::string result;
    for (const std::string& part : parts) result += "/" + part;
    return result.empty() ? "/" : result;
}

// --- what a state means for a program, and what to do next -----------------

// The folder this cudyn-info runs from; empty where it cannot be known.
std::string own_folder() {
#ifdef __linux__
    char self[4096];
    const ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length > 0) {
        self[length] = '\0';
        std::string folder(self);
        return folder.erase(folder.rfind('/'));
    }
#endif
    return {};
}

// The first candidate that is a regular file at an absolute path, normalized;
// empty when none is.
std::string first_file(const std::vector<std::string>& candidates) {
    for (const std::string& candidate : candidates) {
        if (candidate.empty() || candidate[0] != '/') continue;  // the loader takes absolute paths only
        struct stat status {};
        if (stat(candidate.c_str(), &status) == 0 && S_ISREG(status.st_mode)) return normalized(candidate);
    }
    return {};
}

// The emulated fake driver this cudyn-info can point a dry run at: next to a
// build tree's cudyn-info (<build>/tools/ -> <build>/tests/fakecuda/), or in
// the install tree it belongs to (<bindir> -> <libdir>/cudyn/fake/, relative
// first so an unpacked release tarball finds its own). Empty when none is there.
std::string find_fake_driver() {
    std::vector<std::string> candidates;
    const std::string folder = own_folder();
    if (!folder.empty()) {
        if (!std::string(CUDYN_INFO_FAKE_FROM_BINDIR).empty())
            candidates.push_back(folder + "/" CUDYN_INFO_FAKE_FROM_BINDIR);
        candidates.push_back(folder + "/../tests/fakecuda/emulated/" CUDYN_INFO_FAKE_NAME);
    }
    candidates.emplace_back(CUDYN_INFO_FAKE_INSTALLED);
    return first_file(candidates);
}

// A page of the installed guide (<datadir>/doc/cudyn/docs/guide/), found the same
// way as the fake: relative to this cudyn-info first, then the configured
// path. A build tree's cudyn-info has none installed: the page's place in
// cudyn's sources is named instead.
std::string guide_page(const char* page) {
    std::vector<std::string> candidates;
    const std::string folder = own_folder();
    if (!folder.empty() && !std::string(CUDYN_INFO_DOC_FROM_BINDIR).empty())
        candidates.push_back(folder + "/" CUDYN_INFO_DOC_FROM_BINDIR "/docs/guide/" + page);
    candidates.push_back(std::string(CUDYN_INFO_DOC_INSTALLED "/docs/guide/") + page);
    const std::string found = first_file(candidates);
    return found.empty() ? std::string("docs/guide/") + page + " in cudyn's sources" : found;
}

// The command a user pastes for a dry run on the fake: the same report, on an
// emulated CUDA 13.0 driver with one device.
std::string dry_run_command() {
    const std::string fake = find_fake_driver();
    std::string self = "cudyn-info";
#ifdef __linux__
    char path[4096];
    const ssize_t length = readlink("/proc/self/exe", path, sizeof path - 1);
    if (length > 0) self.assign(path, static_cast<std::size_t>(length));
#endif
    if (fake.empty()) return {};
    return "CUDYN_DRIVER_PATH=" + fake + " " + self;
}

// `text` after `first`, broken at spaces into lines of about 100 columns,
// each later one after `indent`.
void print_wrapped(const char* first, const char* indent, const std::string& text) {
    constexpr std::size_t kWidth = 100;
    std::string line = first;
    const std::size_t start = line.size() - (line[0] == '\n' ? 1 : 0);
    std::size_t used = start;
    std::size_t position = 0;
    while (position < text.size()) {
        std::size_t end = text.find(' ', position);
        if (end == std::string::npos) end = text.size();
        const std::string word = text.substr(position, end - position);
        if (used > start && used + 1 + word.size() > kWidth) {
            std::printf("%s\n", line.c_str());
            line = indent;
            used = line.size();
        } else if (used > start) {
            line += ' ';
            ++used;
        }
        line += word;
        used += word.size();
        position = end + 1;
    }
    std::printf("%s\n", line.c_str());
}

void print_next_steps(const cudyn::LoadReport& report, const std::vector<DeviceReport>& devices) {
    const char* meaning = nullptr;
    std::vector<std::string> steps;
    const std::string install_driver =
        "install the NVIDIA driver (it provides libcuda.so.1; the CUDA toolkit alone does not)";
    const std::string point_at = "or point CUDYN_DRIVER_PATH at a driver's libcuda.so.1 (an absolute path)";
    switch (report.state) {
        case cudyn::LoadState::Loaded:
            if (!devices.empty()) return;  // nothing to explain
            meaning = "the driver works but shows this process no device: every call that needs one fails "
                      "with a driver error; nothing crashes";
            steps = {"check that the GPU is visible: nvidia-smi, CUDA_VISIBLE_DEVICES, the container's GPU access"};
            break;
        case cudyn::LoadState::NotFound:
            meaning = "a program using cudyn still runs: every cudyn call returns DriverNotFound "
                      "(ErrorCode::DriverNotFound) and nothing crashes, so it can say so and carry on without a GPU";
            steps = {install_driver, point_at};
            break;
        case cudyn::LoadState::Stub:
            meaning = "the library opened is the CUDA toolkit's stub, made for linking only: every cudyn call "
                      "returns StubDriver (CUDA_ERROR_STUB_LIBRARY) and nothing crashes";
            steps = {"take the toolkit's stubs folder off LD_LIBRARY_PATH (or the ld.so configuration): "
                     "the stub was found before any driver",
                     install_driver + " if there is none", point_at};
            break;
        case cudyn::LoadState::InitFailed:
            meaning = "a driver is installed but cuInit failed: every cudyn call returns DriverInitFailed with "
                      "that CUresult, and nothing crashes";
            if (report.init_result == CUDA_ERROR_NO_DEVICE)
                steps = {"no GPU is visible to this process: check nvidia-smi, CUDA_VISIBLE_DEVICES "
                         "(empty or wrong ordinals hide every device) and the container's GPU access"};
            else if (report.init_result == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH ||
                     report.init_result == CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
                steps = {"libcuda.so.1 does not match the loaded kernel module: reinstall the driver or reboot"};
            else
                steps = {"run nvidia-smi: it reports the same failure with more detail"};
            steps.push_back(point_at + " to try another driver");
            break;
        case cudyn::LoadState::Refused:
            meaning = "nothing was opened: every cudyn call returns DriverRefused and nothing crashes";
            steps = {"give CUDYN_DRIVER_PATH an absolute path, or unset it to use the system's libcuda.so.1"};
            break;
    }
    print_wrapped("\n  what it means   ", "                  ", meaning);
    for (std::size_t i = 0; i < steps.size(); ++i)
        print_wrapped(i ? "                  - " : "  what to do      - ", "                    ", steps[i]);
    const std::string dry_run = dry_run_command();
    if (!dry_run.empty()) {
        std::printf("                  - or a dry run of this report on cudyn's fake driver (no GPU needed):\n"
                    "                      %s\n", dry_run.c_str());
    } else {
        std::printf("                  - or a dry run on cudyn's fake driver: build cudyn with -Dfake_driver=enabled "
                    "(or its tests), then CUDYN_DRIVER_PATH=<fake>/emulated/" CUDYN_INFO_FAKE_NAME " cudyn-info\n");
    }
    std::printf("                  - a program's own tests on the fake: %s\n",
                guide_page("testing-without-a-gpu.md").c_str());
}

void print_usage() {
    std::printf(
        "usage: cudyn-info [--json] [--verbose] [--no-trials] [--require-gpu] [--require NAME,...] [--schema] [--version]\n"
        "  --json         print one JSON object instead of the human-readable report\n"
        "  --verbose      list every entry point and how it was resolved\n"
        "  --no-trials    report attributes only: no capability trials (no allocation, no module load)\n"
        "  --require-gpu  exit 1 unless the driver is loaded and at least one device answered\n"
        "  --require N,.. exit 1 as --require-gpu does; exit 3 unless every device's trials N\n"
        "                 (e.g. vmm_posix_fd,dma_buf) worked;\n"
        "                 exit 4 unless the conditions N hold: all_pairs_peer_access (every ordered pair of\n"
        "                 devices can enable peer access), fabric_healthy (every GPU registered in a healthy\n"
        "                 NVLink fabric, from NVML), nvlinks_active (every GPU has NVLinks, all active)\n"
        "  --schema       print the JSON Schema of --json's output and exit\n"
        "  --version      print cudyn-info's and the loaded libcudyn's versions and exit\n"
        "The driver is libcuda.so.1 unless CUDYN_DRIVER_PATH names another (absolute path).\n");
}


// Conditions on the node as a whole that --require also takes, beside trial
// names: exit 4 (kExitConditionFailed) when one does not hold.
enum class Condition { AllPairsPeerAccess, FabricHealthy, NvLinksActive };
struct ConditionInfo {
    Condition condition;
    const char* name;
};
constexpr ConditionInfo kConditions[] = {{Condition::AllPairsPeerAccess, "all_pairs_peer_access"},
                                         {Condition::FabricHealthy, "fabric_healthy"},
                                         {Condition::NvLinksActive, "nvlinks_active"}};

struct Requirements {
    std::vector<std::size_t> trials;
    std::vector<ConditionInfo> conditions;
};

// The trial and condition names of a --require list, each checked against its list.
bool parse_required(const char* list, Requirements& required) {
    std::string rest = list;
    while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        const std::string name = rest.substr(0, comma);
        rest = comma == std::string::npos ? std::string() : rest.substr(comma + 1);
        bool is_condition = false;
        for (const ConditionInfo& c : kConditions) {
            if (name != c.name) continue;
            required.conditions.push_back(c);
            is_condition = true;
        }
        if (is_condition) continue;
        std::size_t t = 0;
        while (t < cudyn::capability_trial_count && name != cudyn::capability_trial_list[t].name) ++t;
        if (t == cudyn::capability_trial_count) {
            std::fprintf(stderr, "cudyn-info: --require: no trial or condition named '%s' (conditions:", name.c_str());
            for (const ConditionInfo& c : kConditions) std::fprintf(stderr, " %s", c.name);
            std::fprintf(stderr, "; trials:");
            for (const cudyn::CapabilityTrialInfo& info : cudyn::capability_trial_list)
                std::fprintf(stderr, " %s", info.name);
            std::fprintf(stderr, ")\n");
            return false;
        }
        required.trials.push_back(t);
    }
    return !required.trials.empty() || !required.conditions.empty();
}

// Whether one condition holds, printing each reason it does not on stderr.
bool condition_holds(const ConditionInfo& c, const std::vector<DeviceReport>& devices,
                     const cudyn::Topology& topology, const std::string& topology_error) {
    auto fail = [&](const std::string& why) {
        std::fprintf(stderr, "cudyn-info: required %s: %s\n", c.name, why.c_str());
        return false;
    };
    if (devices.empty()) return fail("no device");
    bool holds = true;
    switch (c.condition) {
        case Condition::AllPairsPeerAccess:
            if (!topology_error.empty()) return fail(topology_error);
            for (const cudyn::PeerLink& l : topology.links)
                if (!l.can_access_peer)
                    holds = fail("device " + std::to_string(l.from) + " cannot reach device " + std::to_string(l.to) +
                                 " (cuDeviceCanAccessPeer)");
            return holds;
        case Condition::FabricHealthy:
        case Condition::NvLinksActive: break;
    }
    if (cudyn::nvml_report().state != cudyn::NvmlState::Loaded)
        return fail("NVML is not usable: " + cudyn::nvml_report().message);
    for (const DeviceReport& d : devices) {
        const std::string device = "device " + std::to_string(d.ordinal) + ": ";
        if (c.condition == Condition::FabricHealthy) {
            if (!d.has_fabric) holds = fail(device + (d.fabric_error.empty() ? "no answer" : d.fabric_error));
            else if (!d.fabric.healthy()) holds = fail(device + d.fabric.problems());
            continue;
        }
        if (!d.has_nvlinks) {
            holds = fail(device + (d.nvlink_error.empty() ? "no answer" : d.nvlink_error));
            continue;
        }
        if (d.nvlinks.empty()) holds = fail(device + "no NVLink");
        for (const cudyn::NvLinkState& l : d.nvlinks)
            if (!l.active) holds = fail(device + "link " + std::to_string(l.link) + " is not active");
    }
    return holds;
}

}  // namespace

int main(int argc, char** argv) {
    bool json = false;
    bool verbose = false;
    bool require_gpu = false;
    bool trials = true;
    Requirements required;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (std::strcmp(argv[i], "--verbose") == 0 || std::strcmp(argv[i], "-v") == 0) {
            verbose = true;
        } else if (std::strcmp(argv[i], "--no-trials") == 0) {
            trials = false;
        } else if (std::strcmp(argv[i], "--require-gpu") == 0) {
            require_gpu = true;
        } else if (std::strcmp(argv[i], "--require") == 0 && i + 1 < argc) {
            if (!parse_required(argv[++i], required)) return kExitUsage;
        } else if (std::strcmp(argv[i], "--version") == 0) {
            // The library's own answer too: the program may run against another libcudyn.
            std::printf("cudyn-info %s (libcudyn %s)\n", CUDYN_VERSION_STRING, cudyn::library_version());
            return kExitOk;
        } else if (std::strcmp(argv[i], "--schema") == 0) {
            std::fputs(cudyn::tools::info_schema().c_str(), stdout);
            return kExitOk;
        } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
            print_usage();
            return kExitOk;
        } else {
            std::fprintf(stderr, "cudyn-info: unknown option '%s'\n", argv[i]);
            print_usage();
            return kExitUsage;
        }
    }
    const std::vector<std::size_t>& required_trials = required.trials;
    if (!trials && !required_trials.empty()) {
        std::fprintf(stderr, "cudyn-info: --require needs the trials; drop --no-trials\n");
        return kExitUsage;
    }
    const cudyn::LoadReport& report = cudyn::load_report();
    std::string device_error;
    const std::vector<DeviceReport> devices = collect_devices(device_error, trials);
    std::string topology_error;
    const cudyn::Topology topology = collect_topology(devices, topology_error);
    if (json)
        print_json(report, devices, topology, topology_error, device_error);
    else
        print_human(report, devices, topology, topology_error, device_error, verbose);

    if (require_gpu || !required_trials.empty() || !required.conditions.empty()) {
        bool usable = false;
        for (const DeviceReport& d : devices) usable = usable || d.error.empty();
        if (!usable) {
            std::fprintf(stderr, "cudyn-info: %sno usable GPU (%s)\n", require_gpu ? "" : "--require: ",
                         report.state == cudyn::LoadState::Loaded ? "no device answered" : report.message.c_str());
            return kExitNoGpu;
        }
    }
    if (!required_trials.empty()) {
        // Every device must pass: a job placed on this node may get any of them.
        bool passed = true;
        for (const DeviceReport& d : devices) {
            for (const std::size_t t : required_trials) {
                const cudyn::CapabilityTrialInfo& info = cudyn::capability_trial_list[t];
                const cudyn::TrialResult& r = d.fingerprint.*info.field;
                if (d.fingerprinted && r.outcome == cudyn::TrialOutcome::Works) continue;
                passed = false;
                std::fprintf(stderr, "cudyn-info: device %d: required trial %s: %s (%s)\n", d.ordinal, info.name,
                             d.fingerprinted ? cudyn::to_string(r.outcome) : "not run",
                             d.fingerprinted ? r.detail.c_str() : d.fingerprint_error.c_str());
            }
        }
        if (!passed) return kExitTrialFailed;
    }
    bool conditions_hold = true;
    for (const ConditionInfo& c : required.conditions)
        conditions_hold = condition_holds(c, devices, topology, topology_error) && conditions_hold;
    if (!conditions_hold) return kExitConditionFailed;
    return kExitOk;
}
