// cudyn — a physical VMM allocation (cuMemCreate / cuMemRelease): memory on a
// device or a host NUMA node with no address of its own until a MappedRange
// maps it into an AddressRange. The handle is shared with every MappedRange of
// it and released when the last of them lets go: unmap, then release, in
// every case.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/detail/unique_handle.hpp"
#include "cudyn/vmm/allocation_properties.hpp"

#include <cuda.h>

#include <cstddef>
#include <memory>
#include <utility>

namespace cudyn {

namespace detail {
struct PhysicalHandle;  // the shared record (private to the library)
struct VmmAccess;       // how the library's VMM and sharing sources reach it
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

    // Empty. Move-only; the destructor drops this owner's reference: released
    // now if unmapped, else when the last mapping is unmapped. Silent.
    PhysicalMemory() noexcept = default;

    // The driver's handle, for interop (export, cuMemGetAllocationPropertiesFromHandle).
    CUmemGenericAllocationHandle handle() const noexcept;
    std::size_t size_bytes() const noexcept;
    // The minimum granularity of its properties: mapping offsets are multiples of it.
    std::size_t granularity() const noexcept;
    // Null when empty.
    const AllocationProperties* properties() const noexcept;
    bool empty() const noexcept { return held_.empty(); }

    // Gives up this owner's reference now. When no mapping shares the handle
    // the driver's cuMemRelease answer is reported (a refusal leaves this
    // owner unchanged: retry); otherwise the release happens at the last
    // unmap and ok() is returned. Empty afterwards on success.
    Result<void> release() { return held_.release(); }

private:
    friend struct detail::VmmAccess;
    struct Held {
        std::shared_ptr<detail::PhysicalHandle> record;

        bool empty() const noexcept { return record == nullptr; }
        // Drops this owner's reference; the last owner releases the handle
        // first (a refusal keeps the reference).
        Result<void> release();
        void abandon() noexcept;  // the last owner forgets a handle the driver would not release
    };
    explicit PhysicalMemory(Held held) noexcept : held_(std::move(held)) {}
    detail::UniqueHandle<Held> held_;
};

}  // namespace cudyn
