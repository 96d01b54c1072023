// cudyn — what a device really does, from trials: a capability fingerprint.
//
// Device attributes (device_capabilities.hpp) say what a device was built
// for; ranks of one job still disagree about what works (host-NUMA
// allocations, fabric handles without an IMEX channel). Each trial asks the
// driver to do the thing once (create, export, load a module) and undoes it
// at once, so the answer is the node's, driver and kernel set-up included.
// The trials are the rows of capability_trials.def.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/device.hpp"

#include <cuda.h>

#include <chrono>
#include <cstddef>
#include <string>

namespace cudyn {

enum class TrialOutcome {
    Works,     // the driver did it (and took it back)
    Refused,   // the driver answered that it cannot (NOT_SUPPORTED, INVALID_VALUE, ...), or its entry is missing
    Failed,    // something else went wrong (out of memory, a lost context): the trial could not tell
    Skipped,   // not tried: not applicable on this platform, or an earlier trial did not return
    TimedOut,  // the driver had not answered within the trial's time
};
// A stable lower-case name ("works", "refused", "failed", "skipped", "timed_out").
const char* to_string(TrialOutcome outcome) noexcept;

struct TrialResult {
    TrialOutcome outcome = TrialOutcome::Skipped;
    CUresult driver_result = CUDA_SUCCESS;  // the answer that decided it, when a driver call did
    std::string detail;                     // why, in words; empty when it works
    double milliseconds = 0;                // how long the trial took
};

struct CapabilityFingerprint {
    // Bumped when a trial is added; fields are only ever added.
    static constexpr int kVersion = 2;
    int device = 0;
#define CUDYN_CAPABILITY_TRIAL(field, description) TrialResult field;
#include "cudyn/device/capability_trials.def"
#undef CUDYN_CAPABILITY_TRIAL
    // The newest PTX ISA the driver's JIT loaded, as major * 10 + minor (90 for
    // PTX 9.0); 0 when none loaded (see ptx_jit).
    int newest_ptx_isa = 0;
};

// One row of capability_trials.def, for code that walks every trial.
struct CapabilityTrialInfo {
    const char* name;  // the field's name ("vmm_posix_fd")
    TrialResult CapabilityFingerprint::*field;
    const char* description;
};
inline constexpr CapabilityTrialInfo capability_trial_list[] = {
#define CUDYN_CAPABILITY_TRIAL(field, description) {#field, &CapabilityFingerprint::field, description},
#include "cudyn/device/capability_trials.def"
#undef CUDYN_CAPABILITY_TRIAL
};
inline constexpr std::size_t capability_trial_count = sizeof(capability_trial_list) / sizeof(capability_trial_list[0]);

struct FingerprintOptions {
    std::chrono::milliseconds trial_timeout{5000};
};

// Runs every trial on `device`, one after the other on a worker thread with
// the device's primary context current. Each trial leaves nothing allocated
// (a release the driver refuses makes it Failed, naming what is left) and is
// given `trial_timeout`: one that overruns is TimedOut, the ones after it are
// Skipped (a driver call that does not return may hold the driver's locks),
// and the worker is left to finish on its own.
//
// The error cases are those before any trial:
// an unusable driver, a device that cannot be queried, a primary context that
// cannot be retained, a thread that cannot be started, and InvalidArgument for
// a trial_timeout that is not positive. Anything after that is in the trials'
// outcomes.
Result<CapabilityFingerprint> fingerprint_device(const Device& device, const FingerprintOptions& options = {});

}  // namespace cudyn
