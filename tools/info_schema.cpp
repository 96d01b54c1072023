#include "info_schema.hpp"

#include "cudyn/device/capability_fingerprint.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/loader/load_report.hpp"
#include "cudyn/nvml/gpu_fabric.hpp"
#include "cudyn/nvml/nvml_library.hpp"

#include <initializer_list>
#include <string>

namespace cudyn::tools {

namespace {

std::string quoted(const std::string& text) { return "\"" + text + "\""; }

std::string typed(const char* type, const char* description) {
    return std::string("{\"type\": \"") + type + "\", \"description\": " + quoted(description) + "}";
}

// A value or null: the JSON Schema type list ["type", "null"].
std::string nullable(const char* type, const char* description) {
    return std::string("{\"type\": [\"") + type + "\", \"null\"], \"description\": " + quoted(description) + "}";
}

std::string string_enum(std::initializer_list<const char*> values, const char* description) {
    std::string out = "{\"type\": \"string\", \"enum\": [";
    const char* separator = "";
    for (const char* value : values) {
        out += separator + quoted(value);
        separator = ", ";
    }
    return out + "], \"description\": " + quoted(description) + "}";
}

// An object with these (name, schema) properties, all of them required.
std::string object(std::initializer_list<std::pair<std::string, std::string>> properties, const char* description,
                   std::initializer_list<const char*> optional = {}) {
    std::string props, required;
    for (const auto& [name, schema] : properties) {
        props += (props.empty() ? "" : ", ") + quoted(name) + ": " + schema;
        bool is_optional = false;
        for (const char* o : optional) is_optional = is_optional || name == o;
        if (!is_optional) required += (required.empty() ? "" : ", ") + quoted(name);
    }
    return "{\"type\": \"object\", \"description\": " + quoted(description) + ", \"required\": [" + required +
           "], \"properties\": {" + props + "}}";
}

std::string capabilities_schema() {
    std::string props, required;
    for (const DeviceCapabilityInfo& c : device_capability_list) {
        props += (props.empty() ? "" : ", ") + quoted(c.name) + ": " + typed("boolean", c.description);
        required += (required.empty() ? "" : ", ") + quoted(c.name);
    }
    return "{\"type\": \"object\", \"description\": \"device attributes, one flag per capability (non-zero is true)\", "
           "\"required\": [" + required + "], \"properties\": {" + props + "}}";
}

std::string trial_schema(const char* description) {
    return object({{"outcome", string_enum({to_string(TrialOutcome::Works), to_string(TrialOutcome::Refused),
                                            to_string(TrialOutcome::Failed), to_string(TrialOutcome::Skipped),
                                            to_string(TrialOutcome::TimedOut)},
                                           "works: the driver did it and took it back; refused: it answered that it "
                                           "cannot; failed: something else went wrong; skipped: not tried; "
                                           "timed_out: no answer in time")},
                   {"driver_result", typed("string", "the CUresult name that decided it (CUDA_SUCCESS when none)")},
                   {"ms", typed("number", "how long the trial took, in milliseconds")},
                   {"detail", typed("string", "why, in words; empty when it works")}},
                  description);
}

std::string fingerprint_schema() {
    std::string trials, required;
    for (const CapabilityTrialInfo& t : capability_trial_list) {
        trials += (trials.empty() ? "" : ", ") + quoted(t.name) + ": " + trial_schema(t.description);
        required += (required.empty() ? "" : ", ") + quoted(t.name);
    }
    const std::string trials_schema =
        "{\"type\": \"object\", \"description\": \"one trial per capability: the driver asked to do it once\", "
        "\"required\": [" + required + "], \"properties\": {" + trials + "}}";
    return object({{"version", typed("integer", "the fingerprint's version; trials are only ever added")},
                   {"newest_ptx_isa", typed("string", "the newest PTX ISA the driver's JIT loaded (\\\"9.0\\\"), "
                                                      "empty when none")},
                   {"trials", trials_schema}},
                  "what the device really did, from trials (absent with --no-trials)");
}

std::string fabric_schema() {
    return object(
        {{"state", string_enum({to_string(FabricState::NotSupported), to_string(FabricState::NotStarted),
                                to_string(FabricState::InProgress), to_string(FabricState::Completed)},
                               "NVLink fabric registration: not_supported means the GPU is in no fabric")},
         {"status", typed("integer", "the registration's nvmlReturn_t (0: success), once completed")},
         {"cluster_uuid", typed("string", "the fabric cluster (GPU-... spelling); all zero: no cluster")},
         {"clique_id", typed("integer", "the clique within the cluster")},
         {"health_mask", typed("integer", "NVML's health mask: two bits per condition, 1 meaning it holds")},
         {"healthy", typed("boolean", "registered with success and no health condition holds")},
         {"problems", typed("string", "what is wrong, in words; empty when healthy")}},
        "nvmlDeviceGetGpuFabricInfoV (absent without NVML or where it failed)");
}

std::string nvlink_schema() {
    return object({{"link", typed("integer", "NVML's link index")},
                   {"active", typed("boolean", "nvmlDeviceGetNvLinkState: the link is up")}},
                  "one NVLink");
}

std::string nvml_schema() {
    return object(
        {{"state", string_enum({to_string(NvmlState::Loaded), to_string(NvmlState::NotFound),
                                to_string(NvmlState::InitFailed), to_string(NvmlState::Refused)},
                               "what happened when NVML was loaded (CUDYN_NVML_PATH or libnvidia-ml.so.1)")},
         {"message", typed("string", "why, when not loaded")},
         {"requested_path", typed("string", "the library asked for")},
         {"library_path", typed("string", "the library opened, empty when none")},
         {"kernel_driver_version", typed("string", "nvmlSystemGetDriverVersion: the kernel module's driver, "
                                                   "empty when unknown")},
         {"cuda_driver_version", typed("integer", "nvmlSystemGetCudaDriverVersion_v2; 0 when unknown")}},
        "NVML, optional: fabric and NVLink states come from it");
}

}  // namespace

std::string info_schema() {
    const std::string device = object(
        {{"ordinal", typed("integer", "the device's ordinal")},
         {"name", typed("string", "the device's name")},
         {"total_memory", typed("integer", "bytes of device memory")},
         {"compute_capability", typed("string", "major.minor")},
         {"error", typed("string", "the first query that failed, when one did")},
         {"capabilities", capabilities_schema()},
         {"fingerprint", fingerprint_schema()},
         {"fingerprint_error", typed("string", "why the trials could not run, when they could not")},
         {"uuid", typed("string", "cuDeviceGetUuid in nvidia-smi's spelling (GPU-...), when it answered")},
         {"pci_bus_id", typed("string", "cuDeviceGetPCIBusId (0000:18:00.0), when it answered")},
         {"fabric", fabric_schema()},
         {"fabric_error", typed("string", "why NVML gave no fabric information, when NVML is loaded")},
         {"nvlinks", "{\"type\": \"array\", \"description\": \"every NVLink NVML reports (absent without NVML)\", "
                     "\"items\": " + nvlink_schema() + "}"},
         {"nvlink_error", typed("string", "why NVML gave no link states, when NVML is loaded")}},
        "one device",
        {"error", "fingerprint", "fingerprint_error", "uuid", "pci_bus_id", "fabric", "fabric_error", "nvlinks",
         "nvlink_error"});
    const std::string peer = object(
        {{"from", typed("integer", "the ordinal of the device that would reach the other's memory")},
         {"to", typed("integer", "the ordinal of the device whose memory is reached")},
         {"can_access_peer", typed("boolean", "cuDeviceCanAccessPeer: peer access can be enabled")},
         {"performance_rank", typed("integer", "CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK: lower is a faster link")},
         {"access_supported", typed("boolean", "CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED")},
         {"native_atomic_supported", typed("boolean", "CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED")},
         {"cuda_array_access_supported",
          typed("boolean", "CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED (false where the driver lacks it)")},
         {"error", typed("string", "the first query that failed, when one did")},
         {"atomic_capabilities",
          "{\"type\": \"array\", \"description\": \"cuDeviceGetP2PAtomicCapabilities: per CUatomicOperation in enum "
          "order, its CU_ATOMIC_CAPABILITY_* bits (absent where the driver lacks the entry)\", \"items\": {\"type\": "
          "\"integer\"}}"}},
        "one ordered pair of devices", {"error", "atomic_capabilities"});
    const std::string entry = object(
        {{"name", typed("string", "the base name asked for (cuMemAlloc)")},
         {"abi_symbol", typed("string", "the ABI's symbol (cuMemAlloc_v2)")},
         {"version", typed("integer", "the ABI version asked for")},
         {"required", typed("boolean", "present in every driver cudyn supports")},
         {"resolved", typed("boolean", "the driver gave this entry")},
         {"via", string_enum({to_string(ResolvedVia::ProcAddressV2), to_string(ResolvedVia::ProcAddress),
                              to_string(ResolvedVia::Dlsym), to_string(ResolvedVia::None)},
                             "how it was resolved")}},
        "one driver entry point");
    const std::string root = object(
        {{"schema_version", typed("integer", "this schema's version; fields are only ever added")},
         {"state", string_enum({to_string(LoadState::Loaded), to_string(LoadState::NotFound),
                                to_string(LoadState::Stub), to_string(LoadState::InitFailed),
                                to_string(LoadState::Refused)},
                               "what happened when the driver was loaded")},
         {"message", typed("string", "why, when not loaded")},
         {"requested_path", typed("string", "the library asked for")},
         {"library_path", typed("string", "the library opened, empty when none")},
         {"driver_version", typed("integer", "cuDriverGetVersion (13000 is CUDA 13.0); 0 when unknown")},
         {"init_result", nullable("integer", "cuInit's CUresult; null when cuInit never ran (no driver opened)")},
         {"init_result_name", nullable("string", "its name; null when cuInit never ran")},
         {"load_ms", typed("number", "how long loading took, in milliseconds")},
         {"device_error", typed("string", "why devices could not be listed, when they could not")},
         {"devices", "{\"type\": \"array\", \"description\": \"every device the driver lists\", \"items\": " + device + "}"},
         {"topology_error", typed("string", "why the peer matrix could not be read, when it could not")},
         {"nvml", nvml_schema()},
         {"peers", "{\"type\": \"array\", \"description\": \"every ordered pair of distinct devices that answered "
                   "(empty with fewer than two)\", \"items\": " + peer + "}"},
         {"entry_points", "{\"type\": \"array\", \"description\": \"every entry point of the runtime table\", "
                          "\"items\": " + entry + "}"}},
        "cudyn-info --json", {"topology_error"});
    // The draft and identity go first; object() builds the rest.
    return "{\"$schema\": \"https://json-schema.org/draft/2020-12/schema\", \"$id\": \"cudyn-info/" +
           std::to_string(kInfoSchemaVersion) + "\", " + root.substr(1) + "\n";
}

}  // namespace cudyn::tools
