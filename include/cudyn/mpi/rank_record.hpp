// cudyn — what one rank of a job reports about its driver and devices: the
// record every rank contributes to the capability agreement
// (capability_agreement.hpp), as a value and as bytes. Part of the optional
// MPI component (libcudyn-mpi); this header itself needs no MPI, so the same
// records can travel over any transport.
//
// Ranks of one job may run different cudyn versions (a node image updated
// before another), so the bytes are made to be read by older and newer
// peers alike. Fields are only ever appended, and each part says how long it
// is, so a reader takes the fields it knows and skips the rest:
//
//   header (16 bytes)
//     magic[8]  "CUDYNRNK"
//     u16       version: the writer's layout revision (1). Every append raises
//               it; a reader never refuses a newer one, only an incompatible
//               layout would take a new magic
//     u16       rank part size in bytes (version 1: 112)
//     u32       length of the whole record in bytes
//   rank part
//     u32 load state (LoadState's value)        u32 driver version (0: unknown)
//     u32 visible devices (cuDeviceGetCount)    u16 device entries   u16 device entry size (version 1: 24)
//     u16 capability rows                       u16 reserved
//     u32 probe error (ErrorCode's value + 1; 0: the probe completed)
//     u32 probe CUresult                        u32 reserved
//     u8[16] boot id                            u8[64] host name, zero-padded
//   capability table: one u32 CUdevice_attribute per capability row the
//     writer knew, in the order of its device_capabilities.def
//   device entries, each of the stated size
//     u32 ordinal   u32 compute capability major   u32 minor   u32 reserved
//     u64 capability bits: bit i = "yes" for row i of the table above
//   fingerprint part (from version 2; a version-1 record ends before it)
//     u32 part size in bytes, this field included
//     u16 trial names                          u16 fingerprint entry size (version 2: 12 + trial names)
//     trial names: each a u8 length (1..255) and that many bytes, the
//       capability_trials.def field name ("vmm_posix_fd"; never renamed)
//     fingerprint entries, one per device entry and in its order, each of the stated size
//       u32 state: 0 no trials run, 1 the trials ran, ErrorCode's value + 2
//           when fingerprint_device failed (its trials then read Skipped)
//       u32 that failure's CUresult            u32 newest PTX ISA (major * 10 + minor; 0: none)
//       u8 per trial name, in the names' order: TrialOutcome's value, 0xff
//           for a trial not reported
//   (a later version may add a part after the last one; readers skip it)
//
// Capabilities are matched between versions by their CUdevice_attribute, not
// by position: device_capabilities.def may gain a row anywhere, and a row the
// writer did not know reads "unknown" (RankRecord::reported), not "no".
//
// Trials of a capability fingerprint are matched by name for the same
// reason: a trial the writer did not run, or whose name this reader does not
// know, reads "unknown" (nullopt), not "does not work".
//
// Adding a field: append it to the rank part, the device entry, the
// fingerprint entry or as a new part at the end, raise kRankRecordVersion,
// read it only where the stated size covers it, and give older records a
// value that means "not reported".
#pragma once

#include "cudyn/device/capability_fingerprint.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/core/error.hpp"
#include "cudyn/loader/load_report.hpp"
#include "cudyn/mpi/host_identity.hpp"
#include "cudyn/core/result.hpp"

#include <cuda.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace cudyn::mpi {

inline constexpr std::uint16_t kRankRecordVersion = 2;  // 2: the fingerprint part

// Every capability row of this cudyn set to true.
DeviceCapabilities every_capability() noexcept;

// Why a rank's probe stopped short: the error's kind and driver answer (the
// words stay on the rank that failed).
struct ProbeFailure {
    ErrorCode code = ErrorCode::Driver;
    CUresult driver_result = CUDA_SUCCESS;
};

// What the capability trials (capability_fingerprint.hpp) found on one
// device, as far as a record carries it: each trial's outcome (the details
// and timings stay on the rank) and the newest PTX ISA.
struct DeviceFingerprint {
    // trials[i]: the outcome of capability_trial_list[i]; nullopt where the
    // writer did not report that trial (its cudyn had no such trial).
    std::array<std::optional<TrialOutcome>, capability_trial_count> trials{};
    int newest_ptx_isa = 0;               // major * 10 + minor; 0: none loaded
    std::optional<ProbeFailure> failure;  // fingerprint_device failed: no trial ran, each reads Skipped

    // The outcomes of a fingerprint this rank took.
    static DeviceFingerprint of(const CapabilityFingerprint& fingerprint);
    // The outcome of the trial named like its field ("vmm_posix_fd"); nullopt
    // when not reported or when no trial has that name.
    std::optional<TrialOutcome> outcome(const char* trial) const noexcept;
};

struct DeviceReport {
    int ordinal = 0;
    ComputeCapability compute;
    DeviceCapabilities capabilities;  // rows the writer did not know read false (see RankRecord::reported)
    std::optional<DeviceFingerprint> fingerprint;  // nullopt: no trials run (not asked for, or a version-1 writer)
};

struct RankRecord {
    std::uint16_t version = kRankRecordVersion;  // of the cudyn that wrote it
    LoadState load_state = LoadState::NotFound;  // a newer writer's state keeps its number
    int driver_version = 0;                      // cuDriverGetVersion (13000); 0 when unknown
    int visible_devices = 0;                     // 0 without a usable driver
    std::vector<DeviceReport> devices;           // the devices probed, ascending ordinals
    DeviceCapabilities reported = every_capability();  // rows the writer knew; false: unknown, not "no"
    std::optional<ProbeFailure> probe_failure;   // set when a device could not be read
    HostIdentity host;

    bool driver_loaded() const noexcept { return load_state == LoadState::Loaded; }

    // The bytes above. Device entries past 65535 and host names past 64
    // bytes are cut (no machine has that many devices).
    std::vector<std::uint8_t> to_bytes() const;
    // InvalidArgument naming what is wrong: shorter than its header or than a
    // part it announces, wrong magic, version 0, a length field that is not
    // the byte count, parts smaller than version 1's, more than 64 capability
    // rows or one attribute listed twice, a device ordinal outside the
    // visible devices; from version 2 a fingerprint part that is missing,
    // does not fit, is smaller than version 2's, or names a trial twice or
    // with no name. A newer writer's extra fields, trials, outcomes (read as
    // Failed) and parts are skipped.
    static Result<RankRecord> from_bytes(const void* data, std::size_t size);
};

struct RankProbeOptions {
    // The device ordinals this rank reports (the one it uses, say); empty:
    // every visible device.
    std::vector<int> devices;
    // Run the capability trials (fingerprint_device) on each reported device,
    // each trial given trial_timeout. They create and release a little memory
    // on every device, a few milliseconds each where the driver answers.
    bool trials = true;
    std::chrono::milliseconds trial_timeout{5000};
};

// This process's record: the loader's state and driver version, then the
// capabilities and compute capability of each device (probe_capabilities,
// read once per device and cached). Never fails, so that a rank without a
// driver, or whose driver fails a query, still takes its part in a
// collective: a driver that is not usable is its load state with no devices;
// a query that fails, or an ordinal in `options` that is not a visible device,
// stops the probe there with probe_failure set. A fingerprint that fails is
// that device's DeviceFingerprint::failure; the probe goes on.
RankRecord probe_this_rank(const RankProbeOptions& options = {});

}  // namespace cudyn::mpi
