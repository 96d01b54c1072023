// cudyn — what a device can do for the memory modules, probed from attributes.
//
// Every flag is one row of device_capabilities.def (its attribute and what it
// allows are written there), so the struct, the probe, the cache and
// cudyn-info cannot disagree about the list.
#pragma once

#include "cudyn/device/device.hpp"

#include <cuda.h>

#include <cstddef>

namespace cudyn {

struct DeviceCapabilities {
#define CUDYN_DEVICE_CAPABILITY(field, attribute, description) bool field = false;
#include "cudyn/device/device_capabilities.def"
#undef CUDYN_DEVICE_CAPABILITY
};

// One row of device_capabilities.def, for code that walks every capability:
// cudyn-info prints them all, and a NotSupported message names the attribute
// that was 0.
struct DeviceCapabilityInfo {
    const char* name;                  // the field's name ("posix_fd_handles")
    bool DeviceCapabilities::*field;
    CUdevice_attribute attribute;
    const char* attribute_name;        // without the CU_DEVICE_ATTRIBUTE_ prefix
    const char* description;
};

// In the .def's order, which is the struct's.
inline constexpr DeviceCapabilityInfo device_capability_list[] = {
#define CUDYN_DEVICE_CAPABILITY(field, attribute, description) \
    {#field, &DeviceCapabilities::field, attribute, &#attribute[sizeof "CU_DEVICE_ATTRIBUTE_" - 1], description},
#include "cudyn/device/device_capabilities.def"
#undef CUDYN_DEVICE_CAPABILITY
};
inline constexpr std::size_t device_capability_count =
    sizeof(device_capability_list) / sizeof(device_capability_list[0]);

// Every attribute of device_capability_list, read from the driver once per
// device: the first successful probe is stored and later calls (and the
// library's own checks: PhysicalMemory::create, allocation_granularity,
// advice, prefetch, exports) answer from memory without a driver call. CUDA
// fixes device attributes at cuInit and cudyn never unloads the driver, so
// there is no re-read. A failed probe is not stored: the next call asks again.
//
// An attribute the driver does not know (an old driver answers
// CUDA_ERROR_INVALID_VALUE, or NOT_SUPPORTED) counts as "no"; any other
// failure (out of memory, a lost context, an unusable driver) fails the probe.
Result<DeviceCapabilities> probe_capabilities(const Device& device);

}  // namespace cudyn
