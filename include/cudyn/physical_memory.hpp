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

#include "cudyn/allocation_properties.hpp"
#include "cudyn/result.hpp"

#include <cuda.h>

#include <cstddef>
#include <memory>

namespace cudyn {

namespace detail {
struct PhysicalHandle;
struct ShareableAccess;  // shareable_memory.cpp: a PhysicalMemory from an imported handle
}  // namespace detail

class PhysicalMemory {
public:
    // cuMemCreate of `size` bytes with `properties`. InvalidArgument for bad
    // properties (validate()), a zero size or one that is not a multiple of
    // the minimum allocation granularity (which the driver is asked for first);
    // NotSupported where check_supported() says so, before anything is created.
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

private:
    friend class MappedRange;
    friend class GrowableBuffer;
    friend struct detail::ShareableAccess;
    explicit PhysicalMemory(std::shared_ptr<detail::PhysicalHandle> memory) noexcept;
    // cuMemCreate with properties already validated and checked.
    static Result<PhysicalMemory> create_checked(const AllocationProperties& properties, std::size_t size,
                                                 std::size_t granularity);
    std::shared_ptr<detail::PhysicalHandle> memory_;
};

}  // namespace cudyn
