// cudyn — what every rank of a job can rely on: all ranks' records merged
// into their intersection, with the ranks that lack each capability or trial
// named. A pure function of the records: no MPI, no driver. A rank that
// reported no device lacks everything; a row or trial a rank's cudyn did not
// know reads "unknown" for that rank, not "no".
#pragma once

#include "cudyn/device/capability_fingerprint.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/device/device_capabilities.hpp"
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

// One rank where a trial did not work, and how it went there.
struct RankTrialOutcome {
    int rank = 0;
    TrialOutcome outcome = TrialOutcome::Skipped;
};

// One capability trial that does not work on every rank.
struct TrialShortfall {
    const char* trial = "";                // the trial's name ("fabric_export")
    std::vector<RankTrialOutcome> failed;  // ranks where it did not work, with the outcome there
    std::vector<int> unknown;              // ranks that did not report it (and where nothing said it failed)
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
    std::vector<const char*> common_trials;       // trials that Work on every device of every rank, in .def order
    std::vector<TrialShortfall> trial_shortfalls;  // the other trials, in capability_trials.def order
    int min_ptx_isa = 0;                          // lowest newest PTX ISA of every device; 0 when one has none or is unknown
    std::vector<int> fingerprint_failed;          // ranks where fingerprint_device failed on a device

    // Every capability common to all ranks, and every rank with a device.
    bool unanimous() const noexcept { return shortfalls.empty() && without_devices.empty(); }
    // The shortfall of the capability named like its field, or nullptr when
    // every rank has it (or no capability has that name).
    const CapabilityShortfall* shortfall(const char* capability) const noexcept;
    // Whether the trial named like its field Works everywhere; false for a
    // name that is not a trial.
    bool trial_common(const char* trial) const noexcept;
    // The shortfall of the trial so named, or nullptr when it works
    // everywhere (or no trial has that name).
    const TrialShortfall* trial_shortfall(const char* trial) const noexcept;
};

// records[r] is rank r's record. No records: an agreement of zero ranks, in
// which nothing is common.
CapabilityAgreement agree_on_capabilities(const std::vector<RankRecord>& records);

}  // namespace cudyn::mpi
