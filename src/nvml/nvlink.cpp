// cudyn nvml — the state of each NVLink of a GPU.
#include "cudyn/nvml/nvlink.hpp"
#include "nvml/internal.hpp"

#include <string>

namespace cudyn {

Result<std::vector<NvLinkState>> nvlink_states(const DeviceUuid& gpu) {
    constexpr const char* kOperation = "nvlink_states";
    CUDYN_TRY_ASSIGN(const nvml::Table* table, nvml::usable_table());
    if (table->device_get_nvlink_state == nullptr) return nvml::missing_entry("nvmlDeviceGetNvLinkState", kOperation);
    CUDYN_TRY_ASSIGN(nvml::Device device, nvml::device_by_uuid(*table, gpu, kOperation));
    std::vector<NvLinkState> links;
    for (unsigned int link = 0; link < nvml::kMaxNvLinks; ++link) {
        int enabled = 0;
        const int result = table->device_get_nvlink_state(device, link, &enabled);
        // A link index the GPU does not have: NOT_SUPPORTED (a GPU without
        // NVLink answers it for every index) or INVALID_ARGUMENT past the last.
        if (result == nvml::kErrorNotSupported) continue;
        if (result == nvml::kErrorInvalidArgument) break;
        if (result != nvml::kSuccess)
            return nvml::failed_call("nvmlDeviceGetNvLinkState", result,
                                     std::string(kOperation) + ": " + gpu.to_string() + " link " +
                                         std::to_string(link));
        links.push_back({link, enabled == nvml::kFeatureEnabled});
    }
    return links;
}

}  // namespace cudyn
