// cudyn — NVML (libnvidia-ml.so.1 / nvml.dll), opened at first use the way
// the driver is: never linked, an absolute override path (CUDYN_NVML_PATH),
// its own load report. NVML is optional: where it is missing or too old, the
// calls that need it answer a typed absence and the rest of cudyn works.
#pragma once

#include "cudyn/core/result.hpp"

#include <string>

namespace cudyn {

enum class NvmlState {
    Loaded,      // opened, nvmlInit_v2 succeeded
    NotFound,    // no library at the path tried
    InitFailed,  // opened, but nvmlInit_v2 failed (see init_result) or its entry is missing
    Refused,     // CUDYN_NVML_PATH is not absolute; nothing was opened
};

const char* to_string(NvmlState state) noexcept;  // "loaded", "not_found", ...

struct NvmlReport {
    NvmlState state = NvmlState::NotFound;
    std::string requested_path;  // "libnvidia-ml.so.1" or the override
    std::string library_path;    // the real path of what was opened, empty if nothing was
    std::string message;         // why, in words, when state != Loaded
    int init_result = 0;         // nvmlInit_v2's nvmlReturn_t
    // The kernel module's driver version (nvmlSystemGetDriverVersion,
    // "580.65.06"): next to the libcuda that was opened, it tells a
    // forward-compatibility libcuda from the system's own. Empty when unknown.
    std::string kernel_driver_version;
    // The CUDA version of the system's driver (nvmlSystemGetCudaDriverVersion_v2, 13000); 0 when unknown.
    int cuda_driver_version = 0;
};

// Loads NVML on first call (thread-safe, once per process) and reports.
const NvmlReport& nvml_report();

// Success when NVML is loaded; otherwise DriverNotFound (not found),
// DriverRefused (a relative override) or DriverInitFailed, naming NVML.
Result<void> nvml_status();

}  // namespace cudyn
