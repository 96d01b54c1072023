// fakenvml.cpp — a stand-in for libnvidia-ml.so.1 with the few entries cudyn
// uses, for the suites on machines without a GPU. Its GPUs are the fake
// driver's: FAKECUDA_DEVICES of them, with the UUIDs the fake driver gives
// (GPU-6366616b-6500-4000-8000-0000000000NN). Every answer reads the
// environment at the call, so one test process can walk several fabrics:
//
//   FAKENVML_FABRIC        healthy (default): registered, cluster and clique set, no health condition
//                          degraded: as healthy, with degraded bandwidth and route unhealthy in the mask
//                          in_progress: registration in progress; failed: completed with an error status
//                          none: the GPUs are in no fabric (state NOT_SUPPORTED)
//                          standalone: registered with success, but in no cluster (cluster UUID and
//                          clique 0, health mask 0), as NVML 580 answered for two NVLink-linked
//                          H200s of one node without a multi-node fabric
//   FAKENVML_NVLINKS       links per GPU (default 18; 0: no NVLink, every link NOT_SUPPORTED)
//   FAKENVML_NVLINK_DOWN   "DEV:LINK,..." links that are not active
//   FAKENVML_CLIQUE        "DEV:ID,..." clique ids (default 1 for every GPU)
//
// The `old` variant is an NVML from before 550: no nvmlDeviceGetGpuFabricInfoV.
// Not modelled: MIG, every other NVML entry, nvmlShutdown (cudyn never calls it).
// Its NVML types and values are cudyn's own declarations (src/nvml/nvml_api.hpp).
#include "nvml/nvml_api.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__GNUC__)
#define FAKENVML_API extern "C" __attribute__((visibility("default")))
#else
#define FAKENVML_API extern "C"
#endif

namespace {

// NVML's values and the v2 fabric struct: cudyn's declarations, which its
// build checks against nvml.h where one is found.
using namespace cudyn::nvml;
constexpr int kInsufficientSize = 7;
constexpr int kUnknown = 999;
using FabricInfoV2 = GpuFabricInfoV2;
constexpr unsigned int kFabricInfoV2 = kFabricInfoV2Version;
constexpr unsigned int kMaxLinks = kMaxNvLinks;

// A device handle is the ordinal + 1 (never null).

bool initialized = false;

std::string env(const char* name, const char* fallback) {
    const char* value = std::getenv(name);
    return value != nullptr ? value : fallback;
}

int device_count() {
    const int count = std::atoi(env("FAKECUDA_DEVICES", "1").c_str());
    return count < 0 ? 0 : count;
}

int ordinal(Device device) { return static_cast<int>(reinterpret_cast<std::uintptr_t>(device)) - 1; }

bool valid(Device device) { return initialized && ordinal(device) >= 0 && ordinal(device) < device_count(); }

// The value given for `device` in a "DEV:VALUE,..." list, or -1.
long listed(const std::string& list, int device, long key = -1) {
    std::size_t at = 0;
    while (at < list.size()) {
        std::size_t end = list.find(',', at);
        if (end == std::string::npos) end = list.size();
        const std::string item = list.substr(at, end - at);
        const std::size_t colon = item.find(':');
        if (colon != std::string::npos && std::atoi(item.c_str()) == device) {
            const long value = std::atol(item.c_str() + colon + 1);
            if (key < 0 || value == key) return value;
        }
        at = end + 1;
    }
    return -1;
}

}  // namespace

FAKENVML_API int nvmlInit_v2() {
    initialized = true;
    return kSuccess;
}

FAKENVML_API const char* nvmlErrorString(int result) {
    switch (result) {
        case kSuccess: return "Success";
        case kErrorUninitialized: return "Uninitialized";
        case kErrorInvalidArgument: return "Invalid Argument";
        case kErrorNotSupported: return "Not Supported";
        case kErrorNotFound: return "Not Found";
        case kInsufficientSize: return "Insufficient Size";
        case kErrorArgumentVersionMismatch: return "Argument version mismatch";
        default: return "Unknown Error";
    }
}

FAKENVML_API int nvmlSystemGetDriverVersion(char* version, unsigned int length) {
    if (!initialized) return kErrorUninitialized;
    if (version == nullptr) return kErrorInvalidArgument;
    const std::string text = env("FAKENVML_DRIVER_VERSION", "580.65.06");
    if (length < text.size() + 1) return kInsufficientSize;
    std::memcpy(version, text.c_str(), text.size() + 1);
    return kSuccess;
}

FAKENVML_API int nvmlSystemGetCudaDriverVersion_v2(int* version) {
    if (!initialized) return kErrorUninitialized;
    if (version == nullptr) return kErrorInvalidArgument;
    *version = 13000;
    return kSuccess;
}

FAKENVML_API int nvmlDeviceGetHandleByUUID(const char* uuid, Device* device) {
    if (!initialized) return kErrorUninitialized;
    if (uuid == nullptr || device == nullptr) return kErrorInvalidArgument;
    for (int d = 0; d < device_count(); ++d) {
        char expected[64];
        std::snprintf(expected, sizeof expected, "GPU-6366616b-6500-4000-8000-0000000000%02x", d);
        if (std::strcmp(uuid, expected) == 0) {
            *device = reinterpret_cast<Device>(static_cast<std::uintptr_t>(d + 1));
            return kSuccess;
        }
    }
    return kErrorNotFound;
}

FAKENVML_API int nvmlDeviceGetNvLinkState(Device device, unsigned int link, int* active) {
    if (!initialized) return kErrorUninitialized;
    if (!valid(device) || active == nullptr || link >= kMaxLinks) return kErrorInvalidArgument;
    const long links = std::atol(env("FAKENVML_NVLINKS", "18").c_str());
    if (static_cast<long>(link) >= links) return kErrorNotSupported;
    *active = listed(env("FAKENVML_NVLINK_DOWN", ""), ordinal(device), static_cast<long>(link)) >= 0 ? 0 : 1;
    return kSuccess;
}

#if !defined(FAKENVML_OLD)
FAKENVML_API int nvmlDeviceGetGpuFabricInfoV(Device device, FabricInfoV2* info) {
    if (!initialized) return kErrorUninitialized;
    if (!valid(device) || info == nullptr) return kErrorInvalidArgument;
    if (info->version != kFabricInfoV2) return kErrorArgumentVersionMismatch;
    const std::string fabric = env("FAKENVML_FABRIC", "healthy");
    // Every condition of the health mask reported "does not hold" (2 in each two-bit field).
    unsigned int mask = 0xAA;
    unsigned char state = 3;  // completed
    int status = kSuccess;
    bool in_cluster = true;
    if (fabric == "none") {
        state = 0;
        mask = 0;
    } else if (fabric == "standalone") {
        mask = 0;
        in_cluster = false;
    } else if (fabric == "in_progress") {
        state = 2;
    } else if (fabric == "failed") {
        status = kUnknown;
    } else if (fabric == "degraded") {
        mask = 0x99;  // degraded bandwidth (bits 0-1) and route unhealthy (bits 4-5) hold: 1 in each
    }
    std::memset(info->clusterUuid, 0, sizeof info->clusterUuid);
    if (state != 0 && in_cluster) {
        static const unsigned char kCluster[16] = {0xc1, 0x05, 0x7e, 0x40, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 1};
        std::memcpy(info->clusterUuid, kCluster, sizeof kCluster);
    }
    const long clique = listed(env("FAKENVML_CLIQUE", ""), ordinal(device));
    info->cliqueId = state != 0 && in_cluster ? static_cast<unsigned int>(clique >= 0 ? clique : 1) : 0;
    info->state = state;
    info->status = status;
    info->healthMask = mask;
    return kSuccess;
}
#endif
