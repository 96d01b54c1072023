// cudyn — a physical VMM allocation (cuMemCreate / cuMemRelease): memory on a
// device or a host NUMA node with no address of its own until a MappedRange
// maps it into an AddressRange.
//
// Ownership: the generic handle is shared between the PhysicalMemory and every
// MappedRange of it, and released (cuMemRelease) when the last of them lets go.
// The driver would keep mapped memory alive after an early cuMemRelease anyway;
// sharing the handle keeps the order the same in every case (unmap, then
// release) and keeps the handle valid for queries while a mapping exists.
#pragma once

#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/core/result.hpp"

#include <cuda.h>

#include <cstddef>
#include <memory>

namespace cudyn {

namespace detail {
struct PhysicalHandle;  // defined in the library's sources only (src/physical_handle.hpp)
}  // namespace detail

class PhysicalMemory {
public:
    // cuMemCreate of `size` bytes with `properties`. InvalidArgument for bad
    // properties (validate()), a zero size or one that is not a multiple of
    // the minimum allocation granularity (which the driver is asked for first);
    // NotSupported where check_supported() says so, before anything is created.
    // The support check reads the device's cached capabilities: no attribute
    // is asked for after the first call for a device.
    static Result<PhysicalMemory> create(const AllocationProperties& properties, std::size_t size);

    PhysicalMemory() noexcept;  // empty
    PhysicalMemory(PhysicalMemory&& other) noexcept;
    PhysicalMemory& operator=(PhysicalMemory&& other) noexcept;
    PhysicalMemory(const PhysicalMemory&) = delete;
    PhysicalMemory& operator=(const PhysicalMemory&) = delete;
    // Drops this owner's reference: released now if unmapped, else when the
    // last mapping is unmapped. Silent.
    ~PhysicalMemory();

    // The driver's handle, for interop (export, cuMemGetAllocationPropertiesFromHandle).
    CUmemGenericAllocationHandle handle() const noexcept;
    std::size_t size_bytes() const noexcept;
    // The minimum granularity of its properties: mapping offsets are multiples of it.
    std::size_t granularity() const noexcept;
    // Null when empty.
    const AllocationProperties* properties() const noexcept;
    bool empty() const noexcept { return memory_ == nullptr; }

    // Gives up this owner's reference now. When no mapping shares the handle
    // the driver's cuMemRelease answer is reported (a refusal leaves this
    // owner unchanged: retry); otherwise the release happens at the last
    // unmap and ok() is returned. Empty afterwards on success.
    Result<void> release();

    // The shared record behind the handle, for the library's own VMM modules
    // (public so that they need no friendship): a MappedRange keeps it so the
    // handle outlives an early release(), and an import wraps the record it
    // made. Its type is complete only inside cudyn's sources, so other code
    // cannot make or read one; passing it along only adds an owner of the
    // same allocation, released by the last one.
    explicit PhysicalMemory(std::shared_ptr<detail::PhysicalHandle> record) noexcept;
    const std::shared_ptr<detail::PhysicalHandle>& shared_record() const noexcept { return memory_; }

private:
    std::shared_ptr<detail::PhysicalHandle> memory_;
};

}  // namespace cudyn
