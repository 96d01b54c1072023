// cudyn nvml — the loaded NVML entries and the errors built from NVML's answers.
#pragma once

#include "cudyn/core/error.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/device/device_identity.hpp"
#include "nvml/nvml_api.hpp"

namespace cudyn::nvml {

// Resolved once, at the first nvml_report(); a null entry is one this NVML lacks.
struct Table {
    Pfn::InitV2 init_v2 = nullptr;
    Pfn::ErrorString error_string = nullptr;
    Pfn::SystemGetDriverVersion system_get_driver_version = nullptr;
    Pfn::SystemGetCudaDriverVersionV2 system_get_cuda_driver_version_v2 = nullptr;
    Pfn::DeviceGetHandleByUuid device_get_handle_by_uuid = nullptr;
    Pfn::DeviceGetNvLinkState device_get_nvlink_state = nullptr;
    Pfn::DeviceGetGpuFabricInfoV device_get_gpu_fabric_info_v = nullptr;
};

// The table when NVML is loaded and initialised, else NVML's load error.
Result<const Table*> usable_table();

// NVML's answer `result` from `entry` as an Error: NotSupported for
// NOT_SUPPORTED and FUNCTION_NOT_FOUND, Driver otherwise, the message naming
// the nvmlReturn_t and NVML's words for it.
Error failed_call(const char* entry, int result, const std::string& what);
Error missing_entry(const char* entry, const std::string& what);

// The NVML handle of the GPU with this UUID (nvmlDeviceGetHandleByUUID);
// InvalidArgument naming the UUID where NVML knows no such GPU.
Result<Device> device_by_uuid(const Table& table, const DeviceUuid& gpu, const char* operation);

}  // namespace cudyn::nvml
