// cudyn nvml — a GPU's NVLink fabric registration and health.
#include "cudyn/nvml/gpu_fabric.hpp"
#include "nvml/internal.hpp"

#include <cstring>
#include <string>

namespace cudyn {

namespace {

constexpr const char* kOperation = "gpu_fabric";

// The two-bit fields of the health mask, lowest first; 1 in a field means
// the condition holds (2: it does not, 0: not reported).
constexpr const char* kHealthConditions[] = {"degraded bandwidth", "route recovery in progress", "route unhealthy",
                                             "access timeout recovery in progress"};
constexpr unsigned int kConditionHolds = 1;

FabricState state_of(unsigned char raw) noexcept {
    switch (raw) {
        case nvml::kFabricNotStarted: return FabricState::NotStarted;
        case nvml::kFabricInProgress: return FabricState::InProgress;
        case nvml::kFabricCompleted: return FabricState::Completed;
        default: return FabricState::NotSupported;
    }
}

}  // namespace

const char* to_string(FabricState state) noexcept {
    switch (state) {
        case FabricState::NotSupported: return "not_supported";
        case FabricState::NotStarted: return "not_started";
        case FabricState::InProgress: return "in_progress";
        case FabricState::Completed: return "completed";
    }
    return "unknown";
}

bool GpuFabric::in_cluster() const noexcept { return !cluster_uuid.is_zero(); }

bool GpuFabric::healthy() const noexcept { return problems().empty(); }

std::string GpuFabric::problems() const {
    switch (state) {
        case FabricState::NotSupported: return "the GPU is in no NVLink fabric";
        case FabricState::NotStarted: return "fabric registration has not started (is the fabric manager running?)";
        case FabricState::InProgress: return "fabric registration in progress";
        case FabricState::Completed: break;
    }
    if (status != nvml::kSuccess) return "fabric registration failed (NVML status " + std::to_string(status) + ")";
    if (!in_cluster()) return "registered, but in no fabric cluster (cluster UUID all zero): NVLink within this node only";
    std::string found;
    for (unsigned int field = 0; field < sizeof kHealthConditions / sizeof kHealthConditions[0]; ++field) {
        if (((health_mask >> (2 * field)) & 3u) != kConditionHolds) continue;
        found += (found.empty() ? "" : ", ") + std::string(kHealthConditions[field]);
    }
    return found;
}

Result<GpuFabric> gpu_fabric(const DeviceUuid& gpu) {
    CUDYN_TRY_ASSIGN(const nvml::Table* table, nvml::usable_table());
    if (table->device_get_gpu_fabric_info_v == nullptr)
        return nvml::missing_entry("nvmlDeviceGetGpuFabricInfoV", kOperation);
    CUDYN_TRY_ASSIGN(nvml::Device device, nvml::device_by_uuid(*table, gpu, kOperation));
    nvml::GpuFabricInfoV2 info{};
    info.version = nvml::kFabricInfoV2Version;
    const int result = table->device_get_gpu_fabric_info_v(device, &info);
    if (result != nvml::kSuccess)
        return nvml::failed_call("nvmlDeviceGetGpuFabricInfoV", result, std::string(kOperation) + ": " + gpu.to_string());
    GpuFabric fabric;
    fabric.state = state_of(info.state);
    fabric.status = info.status;
    std::memcpy(fabric.cluster_uuid.bytes.data(), info.clusterUuid, fabric.cluster_uuid.bytes.size());
    fabric.clique_id = info.cliqueId;
    fabric.health_mask = info.healthMask;
    return fabric;
}

}  // namespace cudyn
