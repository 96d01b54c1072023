// cudyn — what every rank of a job can rely on: the rank records
// (rank_record.hpp) of all ranks merged into their intersection, with the
// ranks that lack each capability named. Part of the optional MPI component
// (libcudyn-mpi); a pure function of the records, no MPI and no driver.
//
//     auto agreement = cudyn::mpi::agree_on_capabilities(records);  // records[r]: rank r's
//     if (!agreement.common.fabric_handles)
//         for (int rank : agreement.shortfall("fabric_handles")->lacking) ...
//
// The intersection runs over every device every rank reported: a capability
// is common when each of those devices has it. A rank that reported no
// device (no driver, no GPU, a failed probe) therefore lacks everything, and
// a row some rank's cudyn did not know is not common either (that rank is
// listed as unknown for it, apart from those that said no).
#pragma once

#include "cudyn/device.hpp"
#include "cudyn/device_capabilities.hpp"
#include "cudyn/mpi/rank_record.hpp"

#include <cstdint>
#include <vector>

namespace cudyn::mpi {

// One capability that not every rank has.
struct CapabilityShortfall {
    const char* capability = "";  // the DeviceCapabilities field ("fabric_handles")
    std::vector<int> lacking;     // ranks with a device that said no, or with no device
    std::vector<int> unknown;     // ranks whose cudyn did not know this capability
};

struct CapabilityAgreement {
    int rank_count = 0;
    DeviceCapabilities common;                // true where every reported device of every rank says yes
    int min_driver_version = 0;               // lowest cuDriverGetVersion; 0 when a rank has no usable driver
    int min_visible_devices = 0;              // fewest devices any rank sees
    ComputeCapability min_compute;            // lowest of every reported device; 0.0 when a rank reported none
    std::uint16_t min_record_version = 0;     // the oldest cudyn among the ranks (its record layout)
    std::vector<int> without_driver;          // ranks whose load state is not "loaded"
    std::vector<int> without_devices;         // ranks that reported no device
    std::vector<int> probe_failed;            // ranks whose probe stopped short (RankRecord::probe_failure)
    std::vector<CapabilityShortfall> shortfalls;  // in device_capabilities.def order; empty: all agree

    // Every capability common to all ranks, and every rank with a device.
    bool unanimous() const noexcept { return shortfalls.empty() && without_devices.empty(); }
    // The shortfall of the capability named like its field, or nullptr when
    // every rank has it (or no capability has that name).
    const CapabilityShortfall* shortfall(const char* capability) const noexcept;
};

// records[r] is rank r's record. No records: an agreement of zero ranks, in
// which nothing is common.
CapabilityAgreement agree_on_capabilities(const std::vector<RankRecord>& records);

}  // namespace cudyn::mpi
