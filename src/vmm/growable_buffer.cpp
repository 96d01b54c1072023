// cudyn — GrowableBuffer: chunks mapped at the end of one reservation, with
// rollback on a failed grow and a pinned host copy for release/restore.
#include "cudyn/vmm/growable_buffer.hpp"
#include "cudyn/vmm/physical_memory.hpp"

#include "vmm/internal.hpp"
#include "vmm/internal.hpp"
#include "core/internal.hpp"
#include "vmm/internal.hpp"

#include <cstdint>
#include <string>
#include <utility>

namespace cudyn {

namespace {

// x rounded up to a multiple of `step` (> 0); false on overflow.
inline bool round_up(std::size_t x, std::size_t step, std::size_t* out) noexcept {
    const std::size_t rest = x % step;
    if (rest == 0) {
        *out = x;
        return true;
    }
    if (x > static_cast<std::size_t>(-1) - (step - rest)) return false;
    *out = x + (step - rest);
    return true;
}

}  // namespace

Result<GrowableBuffer> GrowableBuffer::create(const AllocationProperties& properties, std::size_t capacity,
                                              GrowableBufferOptions options) {
    CUDYN_TRY(properties.validate());
    if (capacity == 0) return Error::invalid_argument("GrowableBuffer::create: capacity must be non-zero");
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemGetAllocationGranularity_v10020));
    CUDYN_TRY(properties.check_supported());
    auto granularity = detail::query_granularity(properties, Granularity::Minimum);
    if (!granularity) return granularity.error();
    std::size_t chunk = options.chunk_size_bytes;
    if (chunk == 0) {
        auto recommended = detail::query_granularity(properties, Granularity::Recommended);
        if (!recommended) return recommended.error();
        chunk = *recommended;
    }
    if (chunk % *granularity != 0)
        return Error::invalid_argument("GrowableBuffer::create: chunk size " + std::to_string(chunk) +
                                       " is not a multiple of the allocation granularity " +
                                       std::to_string(*granularity) + " of " + properties.describe());
    std::size_t reserved = 0;
    if (!round_up(capacity, chunk, &reserved))
        return Error::invalid_argument("GrowableBuffer::create: capacity " + std::to_string(capacity) +
                                       " rounded up to whole chunks overflows");
    if (options.access.empty()) {
        // Host memory: the device that judges its support, and the host itself.
        if (properties.location().is_host()) {
            CUDYN_TRY_ASSIGN(const int device, detail::judging_device(properties.location()));
            options.access.push_back({Location::device(device), AccessFlags::ReadWrite});
        }
        options.access.push_back({properties.location(), AccessFlags::ReadWrite});
    }
    CUDYN_TRY(detail::check_grants(properties.location(), options.access.data(), options.access.size()));
    auto context = detail::OwnerContext::current();
    if (!context) return context.error();
    auto range = AddressRange::reserve(reserved);
    if (!range) return range.error();
    return GrowableBuffer(properties, std::move(options.access), options.teardown, chunk, *granularity,
                          std::move(*range), std::move(*context));
}

GrowableBuffer::GrowableBuffer(AllocationProperties properties, std::vector<AccessGrant> access, Teardown teardown,
                               std::size_t chunk_size, std::size_t granularity, AddressRange range,
                               detail::OwnerContext context) noexcept
    : properties_(properties),
      owner_(Traits::State{std::move(range), {}, chunk_size, granularity, std::move(access), false, 0, {},
                           std::move(context), teardown}) {}

std::size_t GrowableBuffer::size_bytes() const noexcept {
    return (released() ? state().released_chunks : chunk_count()) * state().chunk_size;
}

void* GrowableBuffer::host_address() const noexcept {
    const Traits::State& owned = state();
    if (owned.released || chunk_count() == 0 || !properties_.location().is_host() ||
        !detail::host_granted(owned.access.data(), owned.access.size(), false))
        return nullptr;
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(device_address()));
}

std::size_t GrowableBuffer::Traits::mapped_chunks(const State& state) noexcept {
    // A chunk whose unmap went through but whose memory the driver would not
    // take back yet is kept at the end, unmapped: it is not part of the buffer.
    std::size_t mapped = state.chunks.size();
    while (mapped > 0 && state.chunks[mapped - 1].empty()) --mapped;
    return mapped;
}

Result<void> GrowableBuffer::require_usable(const char* operation) const {
    if (empty())
        return Error::invalid_argument(std::string("GrowableBuffer::") + operation +
                                       ": the buffer is empty (moved from)");
    if (released())
        return Error::invalid_argument(std::string("GrowableBuffer::") + operation +
                                       ": the buffer's memory is released; restore() it first");
    return ok();
}

Result<void> GrowableBuffer::grow_to(std::size_t bytes) {
    CUDYN_TRY(require_usable("grow_to"));
    if (bytes > capacity_bytes())
        return Error::invalid_argument("GrowableBuffer::grow_to: " + std::to_string(bytes) +
                                       " bytes exceed the capacity of " + std::to_string(capacity_bytes()));
    const std::size_t chunk = state().chunk_size;
    const std::size_t target = bytes / chunk + (bytes % chunk != 0 ? 1 : 0);
    if (target <= chunk_count()) return ok();
    CUDYN_TRY(Traits::unmap_chunks(owner_.get(), chunk_count()));  // first what an earlier shrink still owes the driver
    return map_chunks(target);
}

Result<void> GrowableBuffer::shrink_to(std::size_t bytes) {
    CUDYN_TRY(require_usable("shrink_to"));
    Traits::State& owned = owner_.get();
    const std::size_t target = bytes / owned.chunk_size + (bytes % owned.chunk_size != 0 ? 1 : 0);
    if (target >= owned.chunks.size()) return ok();
    CUDYN_TRY(Traits::wait_for_device(owned));
    return Traits::unmap_chunks(owned, target);
}

Result<void> GrowableBuffer::resize(std::size_t bytes) {
    if (bytes > size_bytes()) return grow_to(bytes);
    return shrink_to(bytes);
}

Result<void> GrowableBuffer::map_chunks(std::size_t target) {
    Traits::State& owned = owner_.get();
    const std::size_t first = owned.chunks.size();
    if (target <= first) return ok();
    // Each new chunk is in one of three states: created (the PhysicalMemory
    // below), mapped (in the chunks, inaccessible) or accessible (after the one
    // cuMemSetAccess). A failure at any of them unmaps and releases the chunks
    // this call added, newest first, and leaves the older ones untouched.
    const auto roll_back = [&owned, first](Error error) {
        (void)Traits::unmap_chunks(owned, first);
        return error;
    };
    owned.chunks.reserve(target);
    for (std::size_t index = first; index < target; ++index) {
        auto memory = PhysicalMemory::create(properties_, owned.chunk_size);
        if (!memory) return roll_back(std::move(memory).error());
        auto mapping = MappedRange::map(owned.range, index * owned.chunk_size, *memory);
        if (!mapping) return roll_back(std::move(mapping).error());
        // The buffer waits for the device once for all its chunks (wait_for_device).
        mapping->set_teardown(Teardown::CallerSynchronized);
        owned.chunks.push_back(std::move(*mapping));
        // The PhysicalMemory goes here; the mapping keeps the handle until it is unmapped.
    }
    const auto access = detail::apply_access(owned.range.device_address() + first * owned.chunk_size,
                                             (target - first) * owned.chunk_size, owned.access.data(),
                                             owned.access.size());
    if (!access) return roll_back(access.error());
    return ok();
}

Result<void> GrowableBuffer::Traits::unmap_chunks(State& state, std::size_t target) {
    // Last first; a chunk the driver refused to unmap stays (mapped, in
    // the chunks, with every chunk below it), so nothing is forgotten while the
    // driver still maps it and a retry picks up where this stopped.
    while (state.chunks.size() > target) {
        if (auto unmapped = state.chunks.back().unmap(); !unmapped) {
            Error error = std::move(unmapped).error();
            error.message += " (the buffer keeps " + std::to_string(mapped_chunks(state)) + " chunk(s) mapped" +
                             (state.chunks.back().empty() ? ", and one unmapped chunk's memory to give back" : "") +
                             "; retry)";
            return error;
        }
        state.chunks.pop_back();
    }
    return ok();
}

Result<void> GrowableBuffer::Traits::wait_for_device(const State& state) {
    if (state.teardown == Teardown::CallerSynchronized || state.chunks.empty()) return ok();
    return detail::wait_for_device_users(state.context, detail::granted_devices(state.access.data(), state.access.size()));
}

Result<void> GrowableBuffer::release_physical(Contents contents) {
    if (empty()) return Error::invalid_argument("GrowableBuffer::release_physical: the buffer is empty (moved from)");
    Traits::State& owned = owner_.get();
    // Released already: what a refused unmap left mapped goes now (nothing when all went).
    if (owned.released) {
        if (owned.chunks.empty()) return ok();
        CUDYN_TRY(Traits::wait_for_device(owned));
        return Traits::unmap_chunks(owned, 0);
    }
    // Before the copy too: work still writing the buffer belongs in the saved bytes.
    CUDYN_TRY(Traits::wait_for_device(owned));
    PinnedBuffer<unsigned char> copy;
    const std::size_t bytes = size_bytes();
    if (contents == Contents::Save && bytes != 0) {
        auto pinned = PinnedBuffer<unsigned char>::allocate(bytes);
        if (!pinned) return std::move(pinned).error();
        CUDYN_TRY(call_driver(&DriverTable::cuMemcpyDtoH_v3020, pinned->data(), owned.range.device_address(), bytes));
        copy = std::move(*pinned);
    }
    owned.released_chunks = chunk_count();
    owned.released = true;
    owned.saved = std::move(copy);
    return Traits::unmap_chunks(owned, 0);
}

Result<void> GrowableBuffer::restore() {
    if (empty()) return Error::invalid_argument("GrowableBuffer::restore: the buffer is empty (moved from)");
    Traits::State& owned = owner_.get();
    if (!owned.released) return ok();
    CUDYN_TRY(Traits::unmap_chunks(owned, chunk_count()));  // first what the release still owes the driver
    CUDYN_TRY(map_chunks(owned.released_chunks));
    if (!owned.saved.empty()) {
        const auto copied = call_driver(&DriverTable::cuMemcpyHtoD_v3020, owned.range.device_address(),
                                        owned.saved.data(), owned.saved.size_bytes());
        if (!copied) {
            (void)Traits::unmap_chunks(owned, 0);
            return copied;
        }
        // Still released until the saved copy is given back too: a refusal
        // keeps it, and a retry maps nothing new, copies again and frees it.
        CUDYN_TRY(owned.saved.free());
    }
    owned.released = false;
    owned.released_chunks = 0;
    return ok();
}

Result<void> GrowableBuffer::Traits::release(State& state) {
    auto result = wait_for_device(state);
    // Unmapped even when the wait failed (a faulted context runs no more work).
    auto unmapped = unmap_chunks(state, 0);
    if (result.has_value()) result = std::move(unmapped);
    auto saved_freed = state.saved.free();
    if (result.has_value()) result = std::move(saved_freed);
    state.released = false;
    state.released_chunks = 0;
    // The range is free of mappings now: its last owner frees it.
    auto freed = state.range.free();
    if (result.has_value()) result = std::move(freed);
    state.context.reset();
    return result;
}

}  // namespace cudyn
