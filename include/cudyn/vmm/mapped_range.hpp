// cudyn — PhysicalMemory mapped into an AddressRange (cuMemMap / cuMemUnmap),
// with its access (cuMemSetAccess / cuMemGetAccess). A mapping keeps a
// reference to the memory and to the range, so it is always unmapped before
// either is given back. Unmapping waits for the device first (teardown.hpp)
// unless set_teardown(Teardown::CallerSynchronized).
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/core/teardown.hpp"
#include "cudyn/detail/ledger_ticket.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/detail/unique_handle.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/memory_access.hpp"
#include "cudyn/vmm/physical_memory.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

namespace cudyn {

class MappedRange {
public:
    // Maps all of `memory` at `offset` bytes into `range`. InvalidArgument,
    // before the driver is called, for an empty range or memory, a mapping
    // that does not fit in the range, an offset (or range address) that is not
    // a multiple of the memory's granularity, and a mapping that overlaps one
    // already live in the range. The mapping starts inaccessible.
    static Result<MappedRange> map(const AddressRange& range, std::size_t offset, const PhysicalMemory& memory);
    // map() then set_access(access); unmapped again if setting access fails.
    // The grants are checked before anything is mapped.
    static Result<MappedRange> map(const AddressRange& range, std::size_t offset, const PhysicalMemory& memory,
                                   std::initializer_list<AccessGrant> access);
    static Result<MappedRange> map(const AddressRange& range, std::size_t offset, const PhysicalMemory& memory,
                                   const std::vector<AccessGrant>& access);

    MappedRange() noexcept = default;  // empty; move-only, unmapped (silently) on destruction

    // Sets access for one or several locations over the whole mapping. Each
    // grant's location is validated; a device other than the one the memory
    // lives on must be able to access it (cuDeviceCanAccessPeer) and support
    // VMM, else NotSupported naming the pair. Nothing is set when a check fails.
    Result<void> set_access(Location location, AccessFlags flags);
    Result<void> set_access(std::initializer_list<AccessGrant> grants);
    Result<void> set_access(const std::vector<AccessGrant>& grants);
    // What cuMemGetAccess reports for `location`.
    Result<AccessFlags> access(Location location) const;

    CUdeviceptr device_address() const noexcept { return held_->mapped ? held_->address : 0; }
    std::size_t size_bytes() const noexcept { return held_->size; }
    // The mapping as elements, checked (DeviceSpan::from_bytes). Copies and
    // fills need access set for the device of the current context.
    template <typename T>
    Result<DeviceSpan<T>> device_span_as() const {
        return DeviceSpan<T>::from_bytes(device_address(), held_->mapped ? held_->size : 0);
    }
    // The same bytes, unchecked: every byte view is valid.
    DeviceSpan<std::byte> device_span() const noexcept {
        return DeviceSpan<std::byte>(device_address(), held_->mapped ? held_->size : 0);
    }
    std::size_t offset_bytes() const noexcept { return held_->offset; }  // within the AddressRange
    // Where the host reads and writes the mapping directly: the mapped
    // address, for memory on a host location (AllocationProperties::host(),
    // host_numa(n)) whose host location was granted access
    // ({Location::host_numa(n), AccessFlags::ReadWrite} next to the device's
    // grant); null otherwise, and for device memory, which the host cannot
    // dereference.
    void* host_address() const noexcept;
    // No mapping (moved from, unmapped, never mapped).
    bool empty() const noexcept { return !held_->mapped; }
    // Where the mapped memory lives (the PhysicalMemory's location); null when empty.
    const Location* memory_location() const noexcept;

    // Unmaps now (after waiting for the device, as teardown() says), then lets
    // go of the memory and the reservation, giving them back to the driver
    // where this was their last owner; reports the first error. A refusal
    // leaves what the driver still holds held here: if the unmap was refused
    // the mapping is still there, unchanged; if a give-back was refused the
    // mapping is gone (empty()) but the handle or range is kept. Either way
    // unmap() can be retried. ok() when nothing is left.
    Result<void> unmap() { return held_.release(); }
    // What unmap() and the destructor wait for (WaitForDevice unless set).
    void set_teardown(Teardown teardown) noexcept { held_->teardown = teardown; }
    Teardown teardown() const noexcept { return held_->teardown; }

private:
    // Dropped unreleased (unique_handle.hpp), members go last to first: the
    // handle before the reservation (the driver's order), and the context,
    // which must outlive what was released into it, after both.
    struct Held {
        detail::OwnerContext context;  // the context current at map(): synchronized before the unmap
        std::shared_ptr<detail::Reservation> reservation;
        std::shared_ptr<detail::PhysicalHandle> memory;
        CUdeviceptr address = 0;
        std::size_t offset = 0;
        std::size_t size = 0;
        bool mapped = false;      // false once unmapped, while a give-back may still be owed
        std::uint64_t users = 0;  // other devices granted access (detail::granted_devices)
        Teardown teardown = Teardown::WaitForDevice;  // a setting: kept by a release
        bool host_access = false;  // the last grant to a host location gave access (host_address())
        std::uint64_t host_seq = 0;  // when that grant was made (ordered against range-wide grants)
        detail::LedgerTicket ledger;  // counted out when unmapped

        // Nothing mapped, and no handle or reservation left to give back.
        bool empty() const noexcept { return !mapped && memory == nullptr && reservation == nullptr; }
        // Waits as teardown says, unmaps, then lets go of the handle and the
        // reservation (given back where this was their last owner). Each step
        // the driver refuses stops it there with the rest still held; a failed
        // wait still unmaps and is reported once nothing is left.
        Result<void> release();
        void abandon() noexcept;  // the reservation forgets a mapping still live
        // Records grants that were just applied.
        void granted(const AccessGrant* grants, std::size_t count) noexcept;
    };
    explicit MappedRange(Held held) noexcept : held_(std::move(held)) {}
    static Result<MappedRange> map_with_access(const AddressRange& range, std::size_t offset,
                                               const PhysicalMemory& memory, const AccessGrant* grants,
                                               std::size_t count);
    Result<void> set_access(const AccessGrant* grants, std::size_t count);

    detail::UniqueHandle<Held> held_;
};

}  // namespace cudyn
