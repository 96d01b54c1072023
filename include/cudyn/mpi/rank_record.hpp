// cudyn — what one rank of a job reports about its driver and devices, as a
// value and as bytes: the record every rank contributes to the capability
// agreement. Needs no MPI, so records can travel over any transport. The
// bytes are read by older and newer peers alike: fields are only appended and
// each part states its size (the layout is described in src/mpi/rank_record.cpp).
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

inline constexpr std::uint16_t kRankRecordVersion = 3;  // 2: the fingerprint part; 3: device identity

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

// The NVLink fabric domain a device registered in (gpu_fabric.hpp): GPUs
// share memory through fabric handles only inside one domain, the same
// cluster UUID and clique, even across hosts.
struct FabricDomain {
    DeviceUuid cluster_uuid;
    unsigned int clique_id = 0;
    bool healthy = false;  // GpuFabric::healthy()
};

struct DeviceReport {
    int ordinal = 0;
    ComputeCapability compute;
    DeviceCapabilities capabilities;  // rows the writer did not know read false (see RankRecord::reported)
    std::optional<DeviceFingerprint> fingerprint;  // nullopt: no trials run (not asked for, or a version-1 writer)
    // Which physical device (device_identity.hpp): ranks agree on a GPU by
    // these, whatever their CUDA_VISIBLE_DEVICES. nullopt: not reported (the
    // query failed, or a writer older than version 3).
    std::optional<DeviceUuid> uuid;
    std::optional<PciBusId> pci_bus_id;
    // nullopt: no completed fabric registration reported (no NVML, no
    // fabric, or a writer older than version 3).
    std::optional<FabricDomain> fabric;
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
