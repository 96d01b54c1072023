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
//   (a later version may add a part after the device entries; readers skip it)
//
// Capabilities are matched between versions by their CUdevice_attribute, not
// by position: device_capabilities.def may gain a row anywhere, and a row the
// writer did not know reads "unknown" (RankRecord::reported), not "no".
//
// Adding a field (say a trial result of a capability fingerprint): append it
// to the rank part or to the device entry, raise kRankRecordVersion, read it
// only where the stated size covers it, and give older records a value that
// means "not reported".
#pragma once

#include "cudyn/device.hpp"
#include "cudyn/device_capabilities.hpp"
#include "cudyn/error.hpp"
#include "cudyn/load_report.hpp"
#include "cudyn/mpi/host_identity.hpp"
#include "cudyn/result.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace cudyn::mpi {

inline constexpr std::uint16_t kRankRecordVersion = 1;

// Every capability row of this cudyn set to true.
DeviceCapabilities every_capability() noexcept;

struct DeviceReport {
    int ordinal = 0;
    ComputeCapability compute;
    DeviceCapabilities capabilities;  // rows the writer did not know read false (see RankRecord::reported)
};

// Why a rank's probe stopped short: the error's kind and driver answer (the
// words stay on the rank that failed).
struct ProbeFailure {
    ErrorCode code = ErrorCode::Driver;
    CUresult driver_result = CUDA_SUCCESS;
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
    // visible devices. A newer writer's extra fields and parts are skipped.
    static Result<RankRecord> from_bytes(const void* data, std::size_t size);
};

struct RankProbeOptions {
    // The device ordinals this rank reports (the one it uses, say); empty:
    // every visible device.
    std::vector<int> devices;
};

// This process's record: the loader's state and driver version, then the
// capabilities and compute capability of each device (probe_capabilities,
// read once per device and cached). Never fails, so that a rank without a
// driver, or whose driver fails a query, still takes its part in a
// collective: a driver that is not usable is its load state with no devices;
// a query that fails, or an ordinal in `options` that is not a visible device,
// stops the probe there with probe_failure set.
RankRecord probe_this_rank(const RankProbeOptions& options = {});

}  // namespace cudyn::mpi
