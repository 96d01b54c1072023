// cudyn — a reserved range of device virtual addresses (cuMemAddressReserve /
// cuMemAddressFree), into which PhysicalMemory is mapped (MappedRange).
//
// Ownership, and why: the driver must never see cuMemAddressFree for a range
// that still has mappings in it, so the reservation is shared. The
// AddressRange holds one reference and every MappedRange in it holds another;
// the range is freed when the last of them lets go. Destroying the
// AddressRange first is therefore safe: the addresses stay reserved until the
// last mapping is unmapped, and then they are freed. Whatever order the owners
// die in, the driver sees unmap -> release -> free.
#pragma once

#include "cudyn/core/result.hpp"

#include <cuda.h>

#include <cstddef>
#include <memory>

namespace cudyn {

namespace detail {
struct Reservation;
}  // namespace detail

class AddressRange {
public:
    // Reserves `size` bytes of addresses. `alignment` is a power of two, or 0
    // for the driver's default (the allocation granularity); `hint` is an
    // address the driver tries first (0: none), aligned to `alignment`.
    // InvalidArgument for a zero size, a non-power-of-two alignment, a
    // misaligned hint or arithmetic that overflows; the driver additionally
    // wants `size` to be a multiple of the allocation granularity.
    static Result<AddressRange> reserve(std::size_t size, std::size_t alignment = 0, CUdeviceptr hint = 0);

    AddressRange() noexcept;  // empty
    AddressRange(AddressRange&& other) noexcept;
    AddressRange& operator=(AddressRange&& other) noexcept;
    AddressRange(const AddressRange&) = delete;
    AddressRange& operator=(const AddressRange&) = delete;
    // Drops this owner's reference; the range is freed now if no mapping is
    // left in it, else when the last one is unmapped. Silent.
    ~AddressRange();

    CUdeviceptr device_address() const noexcept;
    std::size_t size_bytes() const noexcept;
    bool empty() const noexcept { return reservation_ == nullptr; }
    // Live MappedRanges in this range.
    std::size_t mapping_count() const noexcept;

    // Frees the range now and reports the driver's answer. InvalidArgument
    // (and nothing freed, the owner unchanged) while mappings remain; a
    // refusal by the driver leaves it reserved and owned too (retry). ok()
    // when already empty.
    Result<void> free();

private:
    friend class MappedRange;
    explicit AddressRange(std::shared_ptr<detail::Reservation> reservation) noexcept;
    std::shared_ptr<detail::Reservation> reservation_;
};

}  // namespace cudyn
