// cudyn — merging rank records into what every rank shares (capability_agreement.hpp).
#include "cudyn/mpi/capability_agreement.hpp"

#include <algorithm>
#include <climits>
#include <optional>
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

bool CapabilityAgreement::trial_common(const char* trial) const noexcept {
    if (trial == nullptr) return false;
    for (const char* name : common_trials)
        if (std::strcmp(name, trial) == 0) return true;
    return false;
}

const TrialShortfall* CapabilityAgreement::trial_shortfall(const char* trial) const noexcept {
    if (trial == nullptr) return nullptr;
    for (const TrialShortfall& entry : trial_shortfalls)
        if (std::strcmp(entry.trial, trial) == 0) return &entry;
    return nullptr;
}

namespace {

// Trial `index` on one rank: the first outcome other than Works among its
// devices (Skipped without a device); Works when all work; nullopt when no
// device said it failed and one did not report it.
std::optional<TrialOutcome> rank_trial_outcome(const RankRecord& record, std::size_t index) {
    if (record.devices.empty()) return TrialOutcome::Skipped;
    bool unknown = false;
    for (const DeviceReport& device : record.devices) {
        const std::optional<TrialOutcome> outcome =
            device.fingerprint ? device.fingerprint->trials[index] : std::nullopt;
        if (!outcome)
            unknown = true;
        else if (*outcome != TrialOutcome::Works)
            return outcome;
    }
    if (unknown) return std::nullopt;
    return TrialOutcome::Works;
}

// The lowest newest PTX ISA of the rank's devices; 0 without a device or
// where a device has no fingerprint (or one that failed).
int rank_ptx_isa(const RankRecord& record) {
    if (record.devices.empty()) return 0;
    int lowest = INT_MAX;
    for (const DeviceReport& device : record.devices) {
        const bool usable = device.fingerprint && !device.fingerprint->failure;
        lowest = std::min(lowest, usable ? device.fingerprint->newest_ptx_isa : 0);
    }
    return lowest;
}

void agree_on_trials(const std::vector<RankRecord>& records, CapabilityAgreement& agreement) {
    agreement.min_ptx_isa = INT_MAX;
    for (std::size_t r = 0; r < records.size(); ++r) {
        const RankRecord& record = records[r];
        agreement.min_ptx_isa = std::min(agreement.min_ptx_isa, rank_ptx_isa(record));
        if (std::any_of(record.devices.begin(), record.devices.end(), [](const DeviceReport& device) {
                return device.fingerprint && device.fingerprint->failure;
            }))
            agreement.fingerprint_failed.push_back(static_cast<int>(r));
    }
    for (std::size_t i = 0; i < capability_trial_count; ++i) {
        TrialShortfall entry;
        entry.trial = capability_trial_list[i].name;
        for (std::size_t r = 0; r < records.size(); ++r) {
            const std::optional<TrialOutcome> outcome = rank_trial_outcome(records[r], i);
            if (!outcome)
                entry.unknown.push_back(static_cast<int>(r));
            else if (*outcome != TrialOutcome::Works)
                entry.failed.push_back(RankTrialOutcome{static_cast<int>(r), *outcome});
        }
        if (entry.failed.empty() && entry.unknown.empty())
            agreement.common_trials.push_back(entry.trial);
        else
            agreement.trial_shortfalls.push_back(std::move(entry));
    }
}

}  // namespace

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
    agree_on_trials(records, agreement);
    return agreement;
}

}  // namespace cudyn::mpi
