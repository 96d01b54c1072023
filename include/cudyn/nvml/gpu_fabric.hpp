// cudyn — a GPU's place in an NVLink fabric (multi-node NVLink, NVSwitch
// systems) and its health, from NVML. Fabric handles and memory shared across
// hosts work only between GPUs of one healthy domain: the same cluster UUID
// and clique id, registration completed.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/device_identity.hpp"

#include <string>

namespace cudyn {

enum class FabricState {
    NotSupported,  // the GPU is in no NVLink fabric
    NotStarted,    // registration with the fabric manager has not begun
    InProgress,
    Completed,     // see `status` for how it ended
};

const char* to_string(FabricState state) noexcept;  // "not_supported", "not_started", "in_progress", "completed"

struct GpuFabric {
    FabricState state = FabricState::NotSupported;
    int status = 0;             // the registration's nvmlReturn_t (0: success); meaningful once Completed
    DeviceUuid cluster_uuid;    // all zero: no fabric cluster
    unsigned int clique_id = 0;
    // NVML's health mask: two bits per condition (degraded bandwidth, route
    // recovery, route unhealthy, access timeout recovery), 1 meaning it holds.
    unsigned int health_mask = 0;

    // In a fabric cluster: the cluster UUID is not all zero. NVML reports a
    // completed registration with a zero cluster for GPUs linked by NVLink
    // inside one node only; fabric handles have no domain to reach there.
    bool in_cluster() const noexcept;
    // Registration completed with success, in a cluster, and no health
    // condition holds.
    bool healthy() const noexcept;
    // What is wrong, in words ("registration in progress", "degraded
    // bandwidth, route unhealthy"); empty when healthy.
    std::string problems() const;
};

// nvmlDeviceGetGpuFabricInfoV for the GPU with this UUID (as
// Device::uuid() gives it). NotSupported where NVML lacks the entry (older
// than 550) or the GPU has none; NVML's load error where NVML is unusable;
// InvalidArgument naming the UUID where NVML knows no such GPU.
Result<GpuFabric> gpu_fabric(const DeviceUuid& gpu);

}  // namespace cudyn
