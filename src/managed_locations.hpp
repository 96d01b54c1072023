// cudyn — advice and prefetch targets checked and translated for the
// driver's ABI (managed_range.cpp); private to src/.
#pragma once

#include "cudyn/location.hpp"
#include "cudyn/managed_range.hpp"
#include "cudyn/result.hpp"

#include <cuda.h>

#include <cstddef>
#include <string>

namespace cudyn::detail {

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
