// cudyn — GrowableBuffer: chunks mapped at the end of one reservation, with
// rollback on a failed grow and a pinned host copy for release/restore.
#include "cudyn/vmm/growable_buffer.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/vmm/physical_memory.hpp"

#include "core/internal.hpp"
#include "vmm/internal.hpp"

#include <cstdint>
#include <string>
#include <utility>

namespace cudyn {

namespace {

constexpr detail::Operation kCreate{"GrowableBuffer::create"};
constexpr detail::Operation kGrow{"GrowableBuffer::grow_to"};
constexpr detail::Operation kShrink{"GrowableBuffer::shrink_to"};
constexpr detail::Operation kReleasePhysical{"GrowableBuffer::release_physical"};
constexpr detail::Operation kRestore{"GrowableBuffer::restore"};

// x rounded up to a multiple of `step` (> 0); false on overflow.
bool round_up(std::size_t x, std::size_t step, std::size_t* out) noexcept {
    const std::size_t rest = x % step;
    if (rest == 0) {
        *out = x;
        return true;
    }
    if (x > static_cast<std::size_t>(-1) - (step - rest)) return false;
    *out = x + (step - rest);
    return true;
}

// The chunks that hold `bytes`.
std::size_t chunks_for(std::size_t bytes, std::size_t chunk) noexcept {
    return bytes / chunk + (bytes % chunk != 0 ? 1 : 0);
}

Result<void> require_buffer(const GrowableBuffer& buffer, const detail::Operation& operation) {
    if (buffer.empty()) return operation.invalid("the buffer is empty (moved from)");
    return ok();
}

// A buffer whose memory is there to grow or shrink.
Result<void> require_mapped(const GrowableBuffer& buffer, const detail::Operation& operation) {
    CUDYN_TRY(require_buffer(buffer, operation));
    if (buffer.released()) return operation.invalid("the buffer's memory is released; restore() it first");
    return ok();
}

}  // namespace

Result<GrowableBuffer> GrowableBuffer::create(const AllocationProperties& properties, std::size_t capacity,
                                              GrowableBufferOptions options) {
    if (capacity == 0) return kCreate.invalid("capacity must be non-zero");
    CUDYN_TRY(detail::check_properties_for(properties, kCreate));
    CUDYN_TRY_ASSIGN(const std::size_t granularity, detail::query_granularity(properties, Granularity::Minimum));
    std::size_t chunk = options.chunk_size_bytes;
    if (chunk == 0) {
        CUDYN_TRY_ASSIGN(chunk, detail::query_granularity(properties, Granularity::Recommended));
    }
    if (chunk % granularity != 0)
        return kCreate.invalid("chunk size " + std::to_string(chunk) +
                               " is not a multiple of the allocation granularity " + std::to_string(granularity) +
                               " of " + properties.describe());
    std::size_t reserved = 0;
    if (!round_up(capacity, chunk, &reserved))
        return kCreate.invalid("capacity " + std::to_string(capacity) + " rounded up to whole chunks overflows");
    if (options.access.empty()) {
        // Host memory: the device that judges its support, and the host itself.
        if (properties.location().is_host()) {
            CUDYN_TRY_ASSIGN(const int device, detail::judging_device(properties.location()));
            options.access.push_back({Location::device(device), AccessFlags::ReadWrite});
        }
        options.access.push_back({properties.location(), AccessFlags::ReadWrite});
    }
    if (auto checked = detail::check_grants(properties.location(), options.access.data(), options.access.size());
        !checked)
        return kCreate.context(std::move(checked).error());
    Held held;
    CUDYN_TRY_ASSIGN(held.context, detail::OwnerContext::current());
    CUDYN_TRY_ASSIGN(held.range, AddressRange::reserve(reserved));
    held.chunk_size = chunk;
    held.granularity = granularity;
    held.access = std::move(options.access);
    held.teardown = options.teardown;
    return GrowableBuffer(properties, std::move(held));
}

std::size_t GrowableBuffer::size_bytes() const noexcept {
    return (released() ? held_->released_chunks : chunk_count()) * held_->chunk_size;
}

void* GrowableBuffer::host_address() const noexcept {
    if (released() || chunk_count() == 0 || !properties_.location().is_host() ||
        !detail::host_granted(held_->access.data(), held_->access.size(), false))
        return nullptr;
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(device_address()));
}

Result<void> GrowableBuffer::grow_to(std::size_t bytes) {
    CUDYN_TRY(require_mapped(*this, kGrow));
    if (bytes > capacity_bytes())
        return kGrow.invalid(std::to_string(bytes) + " bytes exceed the capacity of " +
                             std::to_string(capacity_bytes()));
    const std::size_t target = chunks_for(bytes, held_->chunk_size);
    if (target <= chunk_count()) return ok();
    CUDYN_TRY(held_->unmap_chunks(chunk_count()));  // first what an earlier shrink still owes the driver
    return held_->map_chunks(properties_, target);
}

Result<void> GrowableBuffer::shrink_to(std::size_t bytes) {
    CUDYN_TRY(require_mapped(*this, kShrink));
    const std::size_t target = chunks_for(bytes, held_->chunk_size);
    if (target >= held_->chunks.size()) return ok();
    CUDYN_TRY(held_->wait_for_device());
    return held_->unmap_chunks(target);
}

Result<void> GrowableBuffer::resize(std::size_t bytes) {
    if (bytes > size_bytes()) return grow_to(bytes);
    return shrink_to(bytes);
}

Result<void> GrowableBuffer::release_physical(Contents contents) {
    CUDYN_TRY(require_buffer(*this, kReleasePhysical));
    // Released already: what a refused unmap left mapped goes now (nothing when all went).
    if (released()) {
        if (held_->chunks.empty()) return ok();
        CUDYN_TRY(held_->wait_for_device());
        return held_->unmap_chunks(0);
    }
    // Before the copy too: work still writing the buffer belongs in the saved bytes.
    CUDYN_TRY(held_->wait_for_device());
    PinnedBuffer<unsigned char> copy;
    const std::size_t bytes = size_bytes();
    if (contents == Contents::Save && bytes != 0) {
        CUDYN_TRY_ASSIGN(copy, PinnedBuffer<unsigned char>::allocate(bytes));
        CUDYN_TRY(call_driver(&DriverTable::cuMemcpyDtoH_v3020, copy.data(), device_address(), bytes));
    }
    held_->released_chunks = chunk_count();
    held_->released = true;
    held_->saved = std::move(copy);
    return held_->unmap_chunks(0);
}

Result<void> GrowableBuffer::restore() {
    CUDYN_TRY(require_buffer(*this, kRestore));
    if (!released()) return ok();
    CUDYN_TRY(held_->unmap_chunks(chunk_count()));  // first what the release still owes the driver
    CUDYN_TRY(held_->map_chunks(properties_, held_->released_chunks));
    PinnedBuffer<unsigned char>& saved = held_->saved;
    if (!saved.empty()) {
        const auto copied =
            call_driver(&DriverTable::cuMemcpyHtoD_v3020, device_address(), saved.data(), saved.size_bytes());
        if (!copied) {
            (void)held_->unmap_chunks(0);
            return copied;
        }
        // Still released until the saved copy is given back too: a refusal
        // keeps it, and a retry maps nothing new, copies again and frees it.
        CUDYN_TRY(saved.free());
    }
    held_->released = false;
    held_->released_chunks = 0;
    return ok();
}

// ---- the held chunks ----------------------------------------------------------------------

std::size_t GrowableBuffer::Held::mapped_chunks() const noexcept {
    // A chunk whose unmap went through but whose memory the driver would not
    // take back yet is kept at the end, unmapped: it is not part of the buffer.
    std::size_t mapped = chunks.size();
    while (mapped > 0 && chunks[mapped - 1].empty()) --mapped;
    return mapped;
}

Result<void> GrowableBuffer::Held::map_chunks(const AllocationProperties& properties, std::size_t target) {
    const std::size_t first = chunks.size();
    if (target <= first) return ok();
    // Each new chunk is in one of three states: created (the PhysicalMemory
    // below), mapped (in the chunks, inaccessible) or accessible (after the one
    // cuMemSetAccess). A failure at any of them unmaps and releases the chunks
    // this call added, newest first, and leaves the older ones untouched.
    const auto roll_back = [this, first](Error error) {
        (void)unmap_chunks(first);
        return error;
    };
    chunks.reserve(target);
    for (std::size_t index = first; index < target; ++index) {
        auto memory = PhysicalMemory::create(properties, chunk_size);
        if (!memory) return roll_back(std::move(memory).error());
        auto mapping = MappedRange::map(range, index * chunk_size, *memory);
        if (!mapping) return roll_back(std::move(mapping).error());
        // The buffer waits for the device once for all its chunks (wait_for_device).
        mapping->set_teardown(Teardown::CallerSynchronized);
        chunks.push_back(std::move(*mapping));
        // The PhysicalMemory goes here; the mapping keeps the handle until it is unmapped.
    }
    const auto granted = detail::apply_access(range.device_address() + first * chunk_size,
                                              (target - first) * chunk_size, access.data(), access.size());
    if (!granted) return roll_back(granted.error());
    return ok();
}

Result<void> GrowableBuffer::Held::unmap_chunks(std::size_t target) {
    // Last first; a chunk the driver refused to unmap stays (mapped, in
    // the chunks, with every chunk below it), so nothing is forgotten while the
    // driver still maps it and a retry picks up where this stopped.
    while (chunks.size() > target) {
        if (auto unmapped = chunks.back().unmap(); !unmapped) {
            Error error = std::move(unmapped).error();
            error.message += " (the buffer keeps " + std::to_string(mapped_chunks()) + " chunk(s) mapped" +
                             (chunks.back().empty() ? ", and one unmapped chunk's memory to give back" : "") +
                             "; retry)";
            return error;
        }
        chunks.pop_back();
    }
    return ok();
}

Result<void> GrowableBuffer::Held::wait_for_device() const {
    if (teardown == Teardown::CallerSynchronized || chunks.empty()) return ok();
    return detail::wait_for_device_users(context, detail::granted_devices(access.data(), access.size()));
}

Result<void> GrowableBuffer::Held::release() {
    auto result = wait_for_device();
    // Unmapped even when the wait failed (a faulted context runs no more work).
    auto unmapped = unmap_chunks(0);
    if (result.has_value()) result = std::move(unmapped);
    auto saved_freed = saved.free();
    if (result.has_value()) result = std::move(saved_freed);
    released = false;
    released_chunks = 0;
    // The range is free of mappings now: its last owner frees it.
    auto freed = range.free();
    if (result.has_value()) result = std::move(freed);
    context.reset();
    return result;
}

}  // namespace cudyn
