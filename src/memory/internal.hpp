// cudyn — private to the memory module (buffers, spans, managed memory,
// plans); the sharing and VMM modules use a few of these too.
#pragma once

#include "cudyn/core/error.hpp"
#include "cudyn/core/location.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/memory/copy_3d.hpp"
#include "cudyn/memory/managed_range.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace cudyn::detail {

// ---- allocations -------------------------------------------------------------------------------

// cuMemFree_v2: the release function of device and managed allocations.
Result<void> free_device_memory(std::uintptr_t address);

// The device of the calling thread's current context.
Result<CUdevice> current_context_device();
// NotSupported naming `entry` unless the current context's device has
// CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY; `what` says what needed it.
Result<void> require_host_mapping(const char* entry, const char* what);
// cuMemHostGetDevicePointer_v2 with flags 0 (the only value it takes).
Result<CUdeviceptr> mapped_device_pointer(void* host);

// ---- synchronous work and steps ----------------------------------------------------------------

// What every synchronous cudyn call that enqueues device work does after
// `issued`: waits for the legacy default stream (cuStreamSynchronize), where
// the no-stream entries and cudyn's own synchronous forms put their work.
// The driver's no-stream memsets and device-to-device copies return before
// the device has done them, and a copy from pageable host memory once the
// source is staged; waiting makes "synchronous" mean done, and orders the
// call before any work the caller enqueues next, on any stream. (Copies to
// the host need no wait: the driver returns them done.)
Result<void> finish_on_legacy_stream(Result<void> issued);

// An item once issued cannot be taken back (a prefetch, a copy on a stream),
// so the error tells how many went out before the failure:
// " (copy 3 of 8, index 2, failed; the 2 before it were issued)".
inline void note_failed_step(Error& error, const char* noun, std::size_t index, std::size_t count) {
    std::string issued;
    if (index == 0)
        issued = "nothing was issued";
    else if (index == 1)
        issued = "the one before it was issued";
    else
        issued = "the " + std::to_string(index) + " before it were issued";
    error.message += " (" + std::string(noun) + " " + std::to_string(index + 1) + " of " + std::to_string(count) +
                     ", index " + std::to_string(index) + ", failed; " + issued + ")";
}

// ---- pitched copies ----------------------------------------------------------------------------

// InvalidArgument naming what was wrong unless both spans are there, the
// extent is not empty, the destination is writable and the box lies inside
// both spans; `operation` names the caller.
Result<void> check_pitched_copy(const PitchedCopy& copy, const char* operation);
// The address of `offset` in `span` (checked to lie inside by the above).
CUdeviceptr pitched_address(const PitchedSpan& span, const Offset3D& offset) noexcept;
// The driver's description of a checked copy: host spans as host memory,
// device spans as unified addresses.
CUDA_MEMCPY3D copy_descriptor(const PitchedCopy& copy) noexcept;

// ---- advice and prefetch locations -------------------------------------------------------------

// A location checked and translated for the ABI this driver serves: the
// CUmemLocation (_v2) entries where resolved, else the v1 CUdevice form (host
// -> CU_DEVICE_CPU; NUMA targets NotSupported). Preparing issues no advice or
// prefetch, so a batch prepares every step before issuing the first.
struct PreparedLocation {
    bool location_abi = false;  // true: cuMemAdvise_v2 / cuMemPrefetchAsync_v2
    CUmemLocation location{};
    CUdevice legacy_device = 0;
};

// For one advice: its location (host for the advices that take none). A
// device ordinal outside the visible devices is InvalidArgument; a device
// without CONCURRENT_MANAGED_ACCESS as preferred location or accessed-by
// target is NotSupported saying so.
Result<PreparedLocation> prepare_advice_location(CUmem_advise advice, const Location& location, const char* what);
Result<void> issue_advice(CUdeviceptr base, std::size_t bytes, CUmem_advise advice, const PreparedLocation& target);
// "read-mostly set", "preferred location set to device 0", ...: what an advice does, for errors.
std::string describe_advice(const ManagedAdvice& step);

// For a prefetch: as above, and a device target must report
// CONCURRENT_MANAGED_ACCESS (NotSupported saying so otherwise).
Result<PreparedLocation> prepare_prefetch_location(const Location& location, const char* what);
Result<void> issue_prefetch(CUdeviceptr base, std::size_t bytes, const PreparedLocation& target, CUstream stream);

}  // namespace cudyn::detail
