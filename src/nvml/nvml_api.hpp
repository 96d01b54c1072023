// cudyn nvml — the few NVML types, values and function shapes cudyn uses,
// declared here so that no nvml.h is needed to build (the CUDA toolkit does
// not always ship it). Where a build finds nvml.h, nvml_api_check.cpp
// compares every declaration below with it.
#pragma once

#include <cstdint>

namespace cudyn::nvml {

// nvmlReturn_t values.
constexpr int kSuccess = 0;
constexpr int kErrorUninitialized = 1;
constexpr int kErrorInvalidArgument = 2;
constexpr int kErrorNotSupported = 3;
constexpr int kErrorNotFound = 6;
constexpr int kErrorFunctionNotFound = 13;
constexpr int kErrorArgumentVersionMismatch = 25;

// nvmlEnableState_t: NVML_FEATURE_ENABLED.
constexpr int kFeatureEnabled = 1;
// NVML_NVLINK_MAX_LINKS: link indices NVML answers for are below this.
constexpr unsigned int kMaxNvLinks = 18;
// NVML_DEVICE_UUID_V2_BUFFER_SIZE and NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE.
constexpr unsigned int kUuidBufferSize = 96;
constexpr unsigned int kDriverVersionBufferSize = 80;

// NVML_GPU_FABRIC_STATE_*.
constexpr unsigned char kFabricNotSupported = 0;
constexpr unsigned char kFabricNotStarted = 1;
constexpr unsigned char kFabricInProgress = 2;
constexpr unsigned char kFabricCompleted = 3;

// nvmlGpuFabricInfo_v2_t; `version` is kFabricInfoV2Version
// (NVML_STRUCT_VERSION(GpuFabricInfo, 2): the size, and 2 in the top byte).
struct GpuFabricInfoV2 {
    unsigned int version;
    unsigned char clusterUuid[16];
    int status;  // nvmlReturn_t
    unsigned int cliqueId;
    unsigned char state;  // nvmlGpuFabricState_t
    unsigned int healthMask;
};
constexpr unsigned int kFabricInfoV2Version = static_cast<unsigned int>(sizeof(GpuFabricInfoV2)) | (2u << 24);

struct DeviceOpaque;  // nvmlDevice_st

// The function shapes, over the types that stand for NVML's own: cudyn
// instantiates them with its declarations, the check with nvml.h's.
template <typename Return, typename Device, typename EnableState, typename FabricInfo>
struct Signatures {
    using InitV2 = Return (*)();
    using ErrorString = const char* (*)(Return);
    using SystemGetDriverVersion = Return (*)(char*, unsigned int);
    using SystemGetCudaDriverVersionV2 = Return (*)(int*);
    using DeviceGetHandleByUuid = Return (*)(const char*, Device*);
    using DeviceGetNvLinkState = Return (*)(Device, unsigned int, EnableState*);
    using DeviceGetGpuFabricInfoV = Return (*)(Device, FabricInfo*);
};
using Device = DeviceOpaque*;
using Pfn = Signatures<int, Device, int, GpuFabricInfoV2>;

}  // namespace cudyn::nvml
