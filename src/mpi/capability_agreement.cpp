// cudyn — merging rank records into what every rank shares (capability_agreement.hpp).
#include "cudyn/mpi/capability_agreement.hpp"

#include <algorithm>
#include <cstring>

namespace cudyn::mpi {

namespace {
bool lower(const ComputeCapability& a, const ComputeCapability& b) noexcept {
    return a.major < b.major || (a.major == b.major && a.minor < b.minor);
}
}  // namespace

const CapabilityShortfall* CapabilityAgreement::shortfall(const char* capability) const noexcept {
    if (capability == nullptr) return nullptr;
    for (const CapabilityShortfall& entry : shortfalls)
        if (std::strcmp(entry.capability, capability) == 0) return &entry;
    return nullptr;
}

CapabilityAgreement agree_on_capabilities(const std::vector<RankRecord>& records) {
    CapabilityAgreement agreement;
    agreement.rank_count = static_cast<int>(records.size());
    if (records.empty()) return agreement;

    agreement.common = every_capability();
    agreement.min_driver_version = records.front().driver_version;
    agreement.min_visible_devices = records.front().visible_devices;
    agreement.min_record_version = records.front().version;
    bool any_device = false;
    ComputeCapability lowest_compute;
    std::vector<CapabilityShortfall> by_row(device_capability_count);

    for (std::size_t r = 0; r < records.size(); ++r) {
        const RankRecord& record = records[r];
        const int rank = static_cast<int>(r);
        // A rank without a usable driver counts as driver version 0, whatever
        // version its (stub, failing) library reported.
        agreement.min_driver_version =
            std::min(agreement.min_driver_version, record.driver_loaded() ? record.driver_version : 0);
        agreement.min_visible_devices = std::min(agreement.min_visible_devices, record.visible_devices);
        agreement.min_record_version = std::min(agreement.min_record_version, record.version);
        if (!record.driver_loaded()) agreement.without_driver.push_back(rank);
        if (record.devices.empty()) agreement.without_devices.push_back(rank);
        if (record.probe_failure) agreement.probe_failed.push_back(rank);
        for (const DeviceReport& device : record.devices) {
            if (!any_device || lower(device.compute, lowest_compute)) lowest_compute = device.compute;
            any_device = true;
        }

        for (std::size_t i = 0; i < device_capability_count; ++i) {
            const auto field = device_capability_list[i].field;
            CapabilityShortfall& entry = by_row[i];
            if (!(record.reported.*field)) {
                entry.unknown.push_back(rank);
                continue;
            }
            const bool every_device = !record.devices.empty() &&
                                      std::all_of(record.devices.begin(), record.devices.end(),
                                                  [field](const DeviceReport& device) { return device.capabilities.*field; });
            if (!every_device) entry.lacking.push_back(rank);
        }
    }

    // A rank with no device has no compute capability: the lowest is then none.
    if (agreement.without_devices.empty()) agreement.min_compute = lowest_compute;
    for (std::size_t i = 0; i < device_capability_count; ++i) {
        CapabilityShortfall& entry = by_row[i];
        if (entry.lacking.empty() && entry.unknown.empty()) continue;
        agreement.common.*device_capability_list[i].field = false;
        entry.capability = device_capability_list[i].name;
        agreement.shortfalls.push_back(std::move(entry));
    }
    return agreement;
}

}  // namespace cudyn::mpi
