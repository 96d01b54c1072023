// cudyn — a device buffer that grows and shrinks in place: one address range
// reserved up front, physical chunks mapped and unmapped at its end, so the
// base address never moves and the chunks that stay keep their bytes (what
// alloc + copy + free cannot give). Unmapping waits for the device first, as
// MappedRange does (teardown.hpp). Not thread-safe: one thread at a time
// changes a buffer.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/core/teardown.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/detail/unique_handle.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/vmm/memory_access.hpp"

#include <cuda.h>

#include <cstddef>
#include <utility>
#include <vector>

namespace cudyn {

struct GrowableBufferOptions {
    // Bytes mapped or unmapped at a time: a multiple of the minimum
    // granularity. 0: the recommended granularity of the properties.
    std::size_t chunk_size_bytes = 0;
    // Who may access the memory; applied to every chunk as it is mapped.
    // Empty: read-write for the device the memory lives on; for memory on a
    // host location (AllocationProperties::host(), host_numa(n)), read-write
    // for the current context's device (device 0 when none is current) and
    // for that host location, so kernels and the host (host_address()) both
    // reach the bytes.
    std::vector<AccessGrant> access;
    // What unmapping waits for (teardown.hpp).
    Teardown teardown = Teardown::WaitForDevice;
};

class GrowableBuffer {
public:
    enum class Contents { Discard, Save };

    // Reserves `capacity` bytes (rounded up to whole chunks) and maps nothing
    // yet. InvalidArgument for bad properties, a zero capacity, a chunk size
    // that is not a multiple of the granularity, bad grants, overflow;
    // NotSupported as AllocationProperties::check_supported() and for peers
    // that cannot access the memory.
    static Result<GrowableBuffer> create(const AllocationProperties& properties, std::size_t capacity,
                                         GrowableBufferOptions options = {});

    // Empty. Move-only; the destructor unmaps and releases every chunk, then
    // frees the range, silently.
    GrowableBuffer() noexcept = default;

    // Maps chunks until size_bytes() >= bytes (no-op when already there), each a
    // MappedRange of its own PhysicalMemory, and sets access for the new ones
    // in one call. InvalidArgument past capacity_bytes() or while released; a
    // failure anywhere (create, map, access) unmaps and releases the chunks
    // this call added: the buffer keeps its previous size, nothing leaked.
    Result<void> grow_to(std::size_t bytes);
    // Unmaps whole chunks past round_up(bytes, chunk_size_bytes()), last first,
    // after the wait (no-op when already smaller). A chunk the driver refuses
    // to unmap stops it there, kept with every chunk below it: a retry goes
    // on from it.
    Result<void> shrink_to(std::size_t bytes);
    // grow_to or shrink_to, whichever applies.
    Result<void> resize(std::size_t bytes);

    // Gives every chunk back to the driver and keeps the address range.
    // With Contents::Save the bytes are first copied to pinned host memory
    // (a PinnedBuffer), after the wait, so work still writing the buffer is
    // in the copy; if that copy fails nothing changes. Released twice: ok().
    // Saving and restoring copy with cuMemcpyDtoH/HtoD: a context must be current.
    Result<void> release_physical(Contents contents = Contents::Discard);
    // Maps new chunks at the same addresses, up to the size held before
    // release_physical(), and copies saved contents back. On failure the buffer
    // stays released (saved contents kept), so restore() can be retried.
    // ok() when not released.
    Result<void> restore();

    CUdeviceptr device_address() const noexcept { return held_->range.device_address(); }
    // The mapped bytes [device_address(), device_address() + size_bytes()) as elements, checked
    // (DeviceSpan::from_bytes); empty while nothing is mapped or released.
    // Growing keeps the span's bytes where they are; shrinking or releasing
    // unmaps them, so take a new span after either.
    template <typename T>
    Result<DeviceSpan<T>> device_span_as() const {
        return DeviceSpan<T>::from_bytes(device_address(), released() ? 0 : size_bytes());
    }
    // The same bytes, unchecked: every byte view is valid.
    DeviceSpan<std::byte> device_span() const noexcept {
        return DeviceSpan<std::byte>(device_address(), released() ? 0 : size_bytes());
    }
    // Where the host reads and writes the mapped bytes directly (the same
    // address as device_address()): for memory on a host location whose
    // grants give that location access (the default grants do). Null
    // otherwise, and while nothing is mapped or the buffer is released.
    // Like a span, valid across growth, not across a shrink or release.
    void* host_address() const noexcept;
    // Bytes mapped: a multiple of chunk_size_bytes(). While released, the size
    // restore() will bring back.
    std::size_t size_bytes() const noexcept;
    std::size_t capacity_bytes() const noexcept { return held_->range.size_bytes(); }
    std::size_t chunk_size_bytes() const noexcept { return held_->chunk_size; }
    std::size_t chunk_count() const noexcept { return held_->mapped_chunks(); }  // mapped chunks
    bool released() const noexcept { return held_->released; }
    bool holds_saved_contents() const noexcept { return !held_->saved.empty(); }
    bool empty() const noexcept { return held_->range.empty(); }
    const AllocationProperties& properties() const noexcept { return properties_; }
    // What shrink_to, release_physical and the destructor wait for.
    void set_teardown(Teardown teardown) noexcept { held_->teardown = teardown; }
    Teardown teardown() const noexcept { return held_->teardown; }

private:
    // Dropped unreleased (unique_handle.hpp), members go last to first: the
    // saved copy, then the chunks, then the range they are mapped in.
    struct Held {
        AddressRange range;
        std::vector<MappedRange> chunks;
        std::size_t chunk_size = 0;
        std::size_t granularity = 0;
        std::vector<AccessGrant> access;    // applied to every chunk; the devices waited for
        bool released = false;
        std::size_t released_chunks = 0;    // chunk count restore() brings back
        PinnedBuffer<unsigned char> saved;  // the bytes release_physical(Save) kept
        detail::OwnerContext context;       // the context current at create(): synchronized before unmapping
        Teardown teardown = Teardown::WaitForDevice;  // a setting: kept by a release

        bool empty() const noexcept { return range.empty() && chunks.empty() && saved.empty() && context.empty(); }
        // Waits as teardown says, unmaps every chunk (those the driver
        // refuses stay, with the chunks below them), gives back the saved
        // copy, then frees the range: each step is tried, the first error
        // reported. The buffer's context reference goes regardless (silently,
        // as OwnerContext::reset does): a chunk left behind keeps its own.
        Result<void> release();

        std::size_t mapped_chunks() const noexcept;  // chunk_count()
        // Maps new chunks of `properties` up to `target`; on failure unmaps
        // and releases those it added, back to the previous count.
        Result<void> map_chunks(const AllocationProperties& properties, std::size_t target);
        // Unmaps down to `target` chunks, last first, without waiting.
        Result<void> unmap_chunks(std::size_t target);
        // What teardown says, before chunks are unmapped.
        Result<void> wait_for_device() const;
    };
    GrowableBuffer(const AllocationProperties& properties, Held held) noexcept
        : properties_(properties), held_(std::move(held)) {}

    AllocationProperties properties_{Location::device(0)};  // not held: a move copies it
    detail::UniqueHandle<Held> held_;
};

}  // namespace cudyn
