// cudyn — a reserved range of device virtual addresses (cuMemAddressReserve /
// cuMemAddressFree), into which PhysicalMemory is mapped (MappedRange).
// The reservation is shared with every MappedRange in it and freed when the
// last of them lets go, so the owners may die in any order: the driver always
// sees unmap, release, free.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/detail/unique_handle.hpp"

#include <cuda.h>

#include <cstddef>
#include <memory>
#include <utility>

namespace cudyn {

namespace detail {
struct Reservation;  // the shared record (private to the library)
struct VmmAccess;    // how the library's VMM sources reach it
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

    // Empty. Move-only; the destructor drops this owner's reference: the
    // range is freed now if no mapping is left in it, else when the last one
    // is unmapped. Silent.
    AddressRange() noexcept = default;

    CUdeviceptr device_address() const noexcept;
    std::size_t size_bytes() const noexcept;
    bool empty() const noexcept { return held_.empty(); }
    // Live MappedRanges in this range.
    std::size_t mapping_count() const noexcept;

    // Frees the range now and reports the driver's answer. InvalidArgument
    // (and nothing freed, the owner unchanged) while mappings remain; a
    // refusal by the driver leaves it reserved and owned too (retry). ok()
    // when already empty.
    Result<void> free();

private:
    friend struct detail::VmmAccess;
    struct Held {
        std::shared_ptr<detail::Reservation> reservation;

        bool empty() const noexcept { return reservation == nullptr; }
        // Drops this owner's reference; the last owner frees the range first
        // (a refusal keeps the reference).
        Result<void> release();
        void abandon() noexcept;  // the last owner forgets a range the driver would not free
    };
    explicit AddressRange(Held held) noexcept : held_(std::move(held)) {}
    detail::UniqueHandle<Held> held_;
};

}  // namespace cudyn
