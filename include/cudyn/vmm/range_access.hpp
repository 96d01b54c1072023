// cudyn — access over a whole reservation: one cuMemSetAccess for every
// mapping in an AddressRange (several chunks, memory of several devices),
// the access every byte of it has, and a checked DeviceSpan across mappings.
//
//     CUDYN_TRY(cudyn::set_range_access(range, {{cudyn::Location::device(0), cudyn::AccessFlags::ReadWrite}}));
//     CUDYN_TRY_ASSIGN(auto all, cudyn::range_span_as<float>(range, cudyn::Location::device(0)));
//
// The driver sets access over any fully mapped range in one call; every
// byte of the reservation must be mapped. Grants are checked against the
// memory of every mapping first (a device must reach each mapping's device),
// so a refused check changes nothing. What a range-wide grant gives counts
// for each MappedRange as its own grants do: its unmap waits for the devices
// granted (Teardown::WaitForDevice), and host_address() follows the later of
// the two grants to a host location.
#pragma once

#include "cudyn/core/location.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/memory_access.hpp"

#include <cuda.h>

#include <cstddef>
#include <initializer_list>
#include <vector>

namespace cudyn {

// Sets access for every mapping of `range` in one driver call.
// InvalidArgument, before the driver, for an empty range, no grants, a byte
// of the range no mapping covers (named by its offset), and the grant checks
// MappedRange::set_access makes, for each mapping's memory.
Result<void> set_range_access(const AddressRange& range, std::initializer_list<AccessGrant> grants);
Result<void> set_range_access(const AddressRange& range, const std::vector<AccessGrant>& grants);

// The access `location` has to every byte of `range`: cuMemGetAccess of each
// mapping, the least of them (None < Read < ReadWrite). InvalidArgument where
// a byte is unmapped.
Result<AccessFlags> range_access(const AddressRange& range, const Location& location);

namespace detail {
// [offset, offset + bytes) of `range` as checked bytes: mapped throughout,
// and `location` has at least `needed` access to each mapping it touches.
Result<CUdeviceptr> checked_range_bytes(const AddressRange& range, std::size_t offset_bytes, std::size_t size_bytes,
                                        const Location& location, AccessFlags needed);
}  // namespace detail

// The whole range, or [offset_bytes, offset_bytes + size_bytes) of it, as
// elements of T across its mappings, for device `location`. InvalidArgument
// where a byte is unmapped, where `location` has less than `needed` access
// to a mapping the span touches (a copy needs ReadWrite to write, Read to
// read), and where the bytes are not whole, aligned elements.
template <typename T>
Result<DeviceSpan<T>> range_span_as(const AddressRange& range, std::size_t offset_bytes, std::size_t size_bytes,
                                    const Location& location, AccessFlags needed = AccessFlags::ReadWrite) {
    CUDYN_TRY_ASSIGN(auto address, detail::checked_range_bytes(range, offset_bytes, size_bytes, location, needed));
    return DeviceSpan<T>::from_bytes(address, size_bytes);
}
template <typename T>
Result<DeviceSpan<T>> range_span_as(const AddressRange& range, const Location& location,
                                    AccessFlags needed = AccessFlags::ReadWrite) {
    return range_span_as<T>(range, 0, range.size_bytes(), location, needed);
}

}  // namespace cudyn
