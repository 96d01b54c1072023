// cudyn nvml — opening NVML once, resolving its few entries, the load report.
#include "cudyn/nvml/nvml_library.hpp"
#include "loader/internal.hpp"
#include "nvml/internal.hpp"

#include <mutex>
#include <string>

namespace cudyn {

namespace {

#if defined(_WIN32)
constexpr const char* kDefaultNvml = "nvml.dll";
#else
constexpr const char* kDefaultNvml = "libnvidia-ml.so.1";
#endif

struct NvmlLoader {
    NvmlReport report;
    nvml::Table table;
};

template <typename Pfn>
void resolve(const loader::DynamicLibrary& library, const char* name, Pfn& slot) {
    slot = reinterpret_cast<Pfn>(library.symbol(name));
}

void load(NvmlLoader& loader) {
    NvmlReport& report = loader.report;
    const char* override_path = loader::secure_environment("CUDYN_NVML_PATH");
    report.requested_path = override_path != nullptr && *override_path != '\0' ? override_path : kDefaultNvml;
    if (override_path != nullptr && *override_path != '\0' && !loader::is_absolute_path(report.requested_path)) {
        report.state = NvmlState::Refused;
        report.message = "CUDYN_NVML_PATH must be an absolute path, not \"" + report.requested_path + "\"";
        return;
    }
    std::string error;
    const loader::DynamicLibrary library = loader::DynamicLibrary::open(report.requested_path, error);
    if (!library.is_open()) {
        report.state = NvmlState::NotFound;
        report.message = "could not open " + report.requested_path + ": " + error;
        return;
    }
    report.library_path = library.real_path();
    nvml::Table& table = loader.table;
    resolve(library, "nvmlInit_v2", table.init_v2);
    resolve(library, "nvmlErrorString", table.error_string);
    resolve(library, "nvmlSystemGetDriverVersion", table.system_get_driver_version);
    resolve(library, "nvmlSystemGetCudaDriverVersion_v2", table.system_get_cuda_driver_version_v2);
    resolve(library, "nvmlDeviceGetHandleByUUID", table.device_get_handle_by_uuid);
    resolve(library, "nvmlDeviceGetNvLinkState", table.device_get_nvlink_state);
    resolve(library, "nvmlDeviceGetGpuFabricInfoV", table.device_get_gpu_fabric_info_v);
    if (table.init_v2 == nullptr) {
        report.state = NvmlState::InitFailed;
        report.message = report.library_path + " has no nvmlInit_v2 (not NVML, or older than cudyn reads)";
        return;
    }
    report.init_result = table.init_v2();
    if (report.init_result != nvml::kSuccess) {
        report.state = NvmlState::InitFailed;
        const char* words = table.error_string != nullptr ? table.error_string(report.init_result) : nullptr;
        report.message = "nvmlInit_v2 returned " + std::to_string(report.init_result) +
                         (words != nullptr ? std::string(" (") + words + ")" : std::string());
        return;
    }
    report.state = NvmlState::Loaded;
    char version[nvml::kDriverVersionBufferSize] = {};
    if (table.system_get_driver_version != nullptr &&
        table.system_get_driver_version(version, sizeof version) == nvml::kSuccess)
        report.kernel_driver_version = version;
    int cuda_version = 0;
    if (table.system_get_cuda_driver_version_v2 != nullptr &&
        table.system_get_cuda_driver_version_v2(&cuda_version) == nvml::kSuccess)
        report.cuda_driver_version = cuda_version;
}

// Allocated once and never destroyed: NVML stays loaded for the process, as
// the driver does, and is never shut down under a caller.
NvmlLoader& loaded() {
    static NvmlLoader* loader = [] {
        auto* fresh = new NvmlLoader;
        load(*fresh);
        return fresh;
    }();
    return *loader;
}

}  // namespace

const char* to_string(NvmlState state) noexcept {
    switch (state) {
        case NvmlState::Loaded: return "loaded";
        case NvmlState::NotFound: return "not_found";
        case NvmlState::InitFailed: return "init_failed";
        case NvmlState::Refused: return "refused";
    }
    return "unknown";
}

const NvmlReport& nvml_report() { return loaded().report; }

Result<void> nvml_status() {
    const NvmlReport& report = nvml_report();
    if (report.state == NvmlState::Loaded) return ok();
    Error error;
    switch (report.state) {
        case NvmlState::NotFound: error.code = ErrorCode::DriverNotFound; break;
        case NvmlState::Refused: error.code = ErrorCode::DriverRefused; break;
        default: error.code = ErrorCode::DriverInitFailed; break;
    }
    error.message = "NVML is not usable: " + report.message;
    return error;
}

namespace nvml {

Result<const Table*> usable_table() {
    CUDYN_TRY(nvml_status());
    return &loaded().table;
}

Error failed_call(const char* entry, int result, const std::string& what) {
    const Table& table = loaded().table;
    const char* words = table.error_string != nullptr ? table.error_string(result) : nullptr;
    Error error;
    error.code = result == kErrorNotSupported || result == kErrorFunctionNotFound ? ErrorCode::NotSupported
                                                                                  : ErrorCode::Driver;
    error.entry_point = entry;
    error.message = what + ": NVML answered " + std::to_string(result) +
                    (words != nullptr ? std::string(" (") + words + ")" : std::string());
    return error;
}

Error missing_entry(const char* entry, const std::string& what) {
    return Error::not_supported(entry, what + ": the loaded NVML has no " + entry + " (an older NVML)");
}

Result<Device> device_by_uuid(const Table& table, const DeviceUuid& gpu, const char* operation) {
    if (table.device_get_handle_by_uuid == nullptr)
        return missing_entry("nvmlDeviceGetHandleByUUID", operation);
    Device device = nullptr;
    const std::string text = gpu.to_string();
    const int result = table.device_get_handle_by_uuid(text.c_str(), &device);
    if (result == kErrorNotFound || result == kErrorInvalidArgument)
        return Error::invalid_argument(std::string(operation) + ": NVML knows no GPU with UUID " + text);
    if (result != kSuccess) return failed_call("nvmlDeviceGetHandleByUUID", result, operation);
    return device;
}

}  // namespace nvml

}  // namespace cudyn
