// cudyn — the state of each NVLink of a GPU, from NVML.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/device_identity.hpp"

#include <vector>

namespace cudyn {

struct NvLinkState {
    unsigned int link = 0;  // NVML's link index
    bool active = false;    // nvmlDeviceGetNvLinkState: trained and up
};

// Every link NVML reports for the GPU with this UUID, in index order; empty
// for a GPU without NVLink. NVML's load error where NVML is unusable;
// InvalidArgument naming the UUID where NVML knows no such GPU.
Result<std::vector<NvLinkState>> nvlink_states(const DeviceUuid& gpu);

}  // namespace cudyn
