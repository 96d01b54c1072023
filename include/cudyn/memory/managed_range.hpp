// cudyn — ManagedRange: advice and prefetch over any managed range
// (cuMemAllocManaged memory, a ManagedBuffer, or a part of either).
//
// Each call uses the CUmemLocation entries (cuMemAdvise_v2,
// cuMemPrefetchAsync_v2, driver 12.2+) where the driver has them, else the v1
// entries with the host translated to CU_DEVICE_CPU; a host NUMA target on a
// v1-only driver is NotSupported. Locations are checked before the driver is
// called: a negative id or a device ordinal outside the visible devices is
// InvalidArgument, and a prefetch to a device without
// CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS is NotSupported.
#pragma once

#include "cudyn/core/location.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/device/stream_ref.hpp"

#include <cuda.h>

#include <cstddef>
#include <initializer_list>

namespace cudyn {

// One raw advice for ManagedRange::advise. The location is ignored (and
// the host passed) for the advices that take none: SET/UNSET_READ_MOSTLY and
// UNSET_PREFERRED_LOCATION.
struct ManagedAdvice {
    CUmem_advise advice;
    Location location;
};

class ManagedRange {
public:
    // [base, base + bytes) of managed memory. InvalidArgument for a null base,
    // zero bytes or a range that wraps around; whether the memory is managed is
    // the driver's to say (CUDA_ERROR_INVALID_VALUE on first use).
    static Result<ManagedRange> over(CUdeviceptr base, std::size_t bytes);

    CUdeviceptr device_address() const noexcept { return base_; }
    std::size_t size_bytes() const noexcept { return bytes_; }
    // [base + offset, base + offset + bytes), which must lie inside this range.
    Result<ManagedRange> subrange(std::size_t offset_bytes, std::size_t size_bytes) const;

    Result<void> set_read_mostly() const;
    Result<void> unset_read_mostly() const;
    Result<void> set_preferred_location(const Location& location) const;
    Result<void> unset_preferred_location() const;
    Result<void> set_accessed_by(const Location& location) const;
    Result<void> unset_accessed_by(const Location& location) const;
    // Several advices in order. Every location is checked and translated for
    // the driver's ABI before the first advice is given, so an unsupported
    // location leaves the range as it was. Advice cannot be taken back (the
    // driver does not report what a range had before), so when the driver
    // refuses one part-way the error names the advices still in effect.
    Result<void> advise(std::initializer_list<ManagedAdvice> advices) const;

    // Stream-ordered migration of the whole range to `location`.
    Result<void> prefetch_to(const Location& location, StreamRef stream) const;
    // Synchronous: on the legacy default stream, returning once the migration is done.
    Result<void> prefetch_to(const Location& location) const;
    // The same for [offset, offset + bytes) of the range, bounds-checked
    // before any driver call.
    Result<void> prefetch_range(std::size_t offset_bytes, std::size_t size_bytes, const Location& location,
                                StreamRef stream) const;
    Result<void> prefetch_range(std::size_t offset_bytes, std::size_t size_bytes, const Location& location) const;

private:
    ManagedRange(CUdeviceptr base, std::size_t bytes) noexcept : base_(base), bytes_(bytes) {}
    // One advice: advise() without the staging a list needs (the named
    // setters are called often enough for that to show).
    Result<void> advise_one(CUmem_advise advice, const Location& location) const;
    CUdeviceptr base_;
    std::size_t bytes_;
};

}  // namespace cudyn
