// cudyn nvml — built only where nvml.h is found: every declaration of
// nvml_api.hpp against NVML's own header, so a drifted value, field or
// function shape fails the build instead of corrupting a call.
#include "nvml/nvml_api.hpp"

#include <nvml.h>

#include <cstddef>
#include <type_traits>

namespace cudyn::nvml {

static_assert(kSuccess == NVML_SUCCESS && kErrorUninitialized == NVML_ERROR_UNINITIALIZED &&
                  kErrorInvalidArgument == NVML_ERROR_INVALID_ARGUMENT &&
                  kErrorNotSupported == NVML_ERROR_NOT_SUPPORTED && kErrorNotFound == NVML_ERROR_NOT_FOUND &&
                  kErrorFunctionNotFound == NVML_ERROR_FUNCTION_NOT_FOUND &&
                  kErrorArgumentVersionMismatch == NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
              "nvmlReturn_t values");
static_assert(kFeatureEnabled == NVML_FEATURE_ENABLED, "nvmlEnableState_t");
static_assert(kMaxNvLinks == NVML_NVLINK_MAX_LINKS, "NVML_NVLINK_MAX_LINKS");
static_assert(kUuidBufferSize == NVML_DEVICE_UUID_V2_BUFFER_SIZE &&
                  kDriverVersionBufferSize == NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE,
              "buffer sizes");
static_assert(kFabricNotSupported == NVML_GPU_FABRIC_STATE_NOT_SUPPORTED &&
                  kFabricNotStarted == NVML_GPU_FABRIC_STATE_NOT_STARTED &&
                  kFabricInProgress == NVML_GPU_FABRIC_STATE_IN_PROGRESS &&
                  kFabricCompleted == NVML_GPU_FABRIC_STATE_COMPLETED,
              "nvmlGpuFabricState_t values");
static_assert(sizeof(nvmlReturn_t) == sizeof(int) && sizeof(nvmlEnableState_t) == sizeof(int) &&
                  sizeof(nvmlGpuFabricState_t) == sizeof(unsigned char),
              "enum sizes");

static_assert(sizeof(GpuFabricInfoV2) == sizeof(nvmlGpuFabricInfo_v2_t) && kFabricInfoV2Version == nvmlGpuFabricInfo_v2,
              "nvmlGpuFabricInfo_v2_t size and version");
#define CUDYN_CHECK_FIELD(field)                                                                   \
    static_assert(offsetof(GpuFabricInfoV2, field) == offsetof(nvmlGpuFabricInfo_v2_t, field) &&   \
                      sizeof(GpuFabricInfoV2::field) == sizeof(nvmlGpuFabricInfo_v2_t::field),      \
                  "nvmlGpuFabricInfo_v2_t::" #field);
CUDYN_CHECK_FIELD(version)
CUDYN_CHECK_FIELD(clusterUuid)
CUDYN_CHECK_FIELD(status)
CUDYN_CHECK_FIELD(cliqueId)
CUDYN_CHECK_FIELD(state)
CUDYN_CHECK_FIELD(healthMask)
#undef CUDYN_CHECK_FIELD

// The shapes, instantiated with nvml.h's types. nvmlDeviceGetGpuFabricInfoV
// takes the newest struct type; cudyn passes the v2 struct with its version,
// which NVML reads first.
using Nvml = Signatures<nvmlReturn_t, nvmlDevice_t, nvmlEnableState_t, nvmlGpuFabricInfoV_t>;
static_assert(std::is_same_v<decltype(&::nvmlInit_v2), Nvml::InitV2>, "nvmlInit_v2");
static_assert(std::is_same_v<decltype(&::nvmlErrorString), Nvml::ErrorString>, "nvmlErrorString");
static_assert(std::is_same_v<decltype(&::nvmlSystemGetDriverVersion), Nvml::SystemGetDriverVersion>,
              "nvmlSystemGetDriverVersion");
static_assert(std::is_same_v<decltype(&::nvmlSystemGetCudaDriverVersion_v2), Nvml::SystemGetCudaDriverVersionV2>,
              "nvmlSystemGetCudaDriverVersion_v2");
static_assert(std::is_same_v<decltype(&::nvmlDeviceGetHandleByUUID), Nvml::DeviceGetHandleByUuid>,
              "nvmlDeviceGetHandleByUUID");
static_assert(std::is_same_v<decltype(&::nvmlDeviceGetNvLinkState), Nvml::DeviceGetNvLinkState>,
              "nvmlDeviceGetNvLinkState");
static_assert(std::is_same_v<decltype(&::nvmlDeviceGetGpuFabricInfoV), Nvml::DeviceGetGpuFabricInfoV>,
              "nvmlDeviceGetGpuFabricInfoV");

}  // namespace cudyn::nvml
