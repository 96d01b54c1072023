// cudyn — StreamOrderedMemory: cuMemAllocAsync / cuMemAllocFromPoolAsync and
// cuMemFreeAsync, with the checks made before the driver.
#include "cudyn/pool/stream_ordered_buffer.hpp"
#include "cudyn/detail/size_checks.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "core/internal.hpp"
#include "device/device_facts.hpp"
#include "device/internal.hpp"
#include "pool/internal.hpp"

#include <string>
#include <utility>

namespace cudyn::detail {

namespace {

constexpr Operation kAllocate{"StreamOrderedBuffer::allocate"};

// NotSupported when the context's device reports no MEMORY_POOLS_SUPPORTED
// (from the per-device cache: no driver call after the first).
Result<void> require_pool_device(const OwnerContext& context) {
    if (context.empty()) return ok();  // no current context: the driver says so
    const auto ordinal = static_cast<int>(context.device());
    CUDYN_TRY_ASSIGN(const auto caps, capabilities(ordinal, context.device()));
    return require_memory_pools(caps, ordinal, kAllocate);
}

// cuMemAllocFromPoolAsync from `pool`, or cuMemAllocAsync from the current
// pool of the stream's device where `pool` is null: the driver's answer.
// The table is called directly, as in allocate's hot case, its entries
// checked first with require_entry; a refusal still becomes call_driver's
// error (allocation_refused).
CUresult allocate_on(const DriverTable& table, CUdeviceptr* address, std::size_t bytes, const MemoryPool* pool,
                     CUstream stream) {
    return pool != nullptr ? table.cuMemAllocFromPoolAsync_v11020(address, bytes, pool->handle(), stream)
                           : table.cuMemAllocAsync_v11020(address, bytes, stream);
}

}  // namespace

CUDYN_DETAIL_COLD Result<void> StreamOrderedMemory::allocation_refused(CUresult result, const MemoryPool* pool) {
    if (pool != nullptr) return call_failed(result, &DriverTable::cuMemAllocFromPoolAsync_v11020);
    return call_failed(result, &DriverTable::cuMemAllocAsync_v11020);
}

CUDYN_DETAIL_COLD Result<void> StreamOrderedMemory::free_refused(CUresult result) {
    return call_failed(result, &DriverTable::cuMemFreeAsync_v11020);
}

CUDYN_DETAIL_OUT_OF_LINE Result<void> StreamOrderedMemory::allocate_checked(StreamOrderedMemory& into,
                                                                            std::size_t count, std::size_t element_size,
                                                                            const MemoryPool* pool, StreamRef stream) {
    CUDYN_TRY_ASSIGN(const std::size_t bytes, checked_bytes(count, element_size, "StreamOrderedBuffer::allocate: count"));
    if (pool != nullptr && pool->empty()) return kAllocate.invalid("the pool is empty (moved from or destroyed)");
    if (pool != nullptr)
        CUDYN_TRY(require_entry(&DriverTable::cuMemAllocFromPoolAsync_v11020));
    else
        CUDYN_TRY(require_entry(&DriverTable::cuMemAllocAsync_v11020));
    const DriverTable& table = *usable_driver();  // the entry is there (above)
    Held& held = into.held_.get();
    // A created cudyn Stream keeps its context alive, and the stream must
    // still exist when the memory is freed on it (as for any stream-ordered
    // call), so the memory relies on it: no retain of its own, no driver call
    // and no atomic reference count per allocation. A default stream or a
    // raw handle names no context of its own: then the current one is
    // retained (in the record: it goes with it), as every other owner does.
    const OwnerContext* context = stream.context();
    if (context == nullptr) {
        CUDYN_TRY_ASSIGN(held.retained, OwnerContext::current());
        context = &held.retained;
    }
    // A pool exists only where pools do; the current pool needs the check.
    if (pool == nullptr) CUDYN_TRY(require_pool_device(*context));
    // On a created stream the driver takes the device, the pool and the
    // order from the stream, whatever context is current (it allocates and
    // frees on a stream of device 0 with device 1's context current, or with
    // none): no context query and no switch, the call's cost being the
    // driver's. A default stream is the calling thread's context's, so
    // there the stream's context (where known) is made current for the call
    // and the caller's put back.
    CUdeviceptr address = 0;
    if (!stream.is_default()) {
        if (const CUresult result = allocate_on(table, &address, bytes, pool, stream.handle()); result != CUDA_SUCCESS)
            return allocation_refused(result, pool);
    } else {
        CUDYN_TRY(in_context(stream.context_handle(), [&]() -> Result<void> {
            const CUresult result = allocate_on(table, &address, bytes, pool, stream.handle());
            return result == CUDA_SUCCESS ? ok() : allocation_refused(result, pool);
        }));
    }
    record(held, address, bytes, pool, stream, *context);
    return ok();
}

Result<StreamOrderedMemory> StreamOrderedMemory::allocate(std::size_t count, std::size_t element_size,
                                                          const MemoryPool* pool, StreamRef stream) {
    StreamOrderedMemory memory;
    CUDYN_TRY(allocate(memory, count, element_size, pool, stream));
    return memory;
}

// The free for every case the inline one leaves (a default stream, a driver
// not loaded or without the entry), and the whole free where the 0.2.0
// header's inline code calls it. A created stream needs no context current
// (as for the allocation): the table is called directly.
Result<void> StreamOrderedMemory::Held::release() {
    if (StreamRef(stream).is_default()) return release_on_default();
    CUDYN_TRY(require_entry(&DriverTable::cuMemFreeAsync_v11020));
    if (const CUresult result = usable_driver()->cuMemFreeAsync_v11020(address, stream); result != CUDA_SUCCESS)
        return free_refused(result);
    forget();
    return ok();
}

// A default stream means "the current context's", which must then be this
// memory's (stream_context is the allocation's for a default stream): made
// current for the free and the caller's put back.
CUDYN_DETAIL_OUT_OF_LINE Result<void> StreamOrderedMemory::Held::release_on_default() {
    return release_in_context(
        stream_context != nullptr ? stream_context : context,
        [this] { return call_driver(&DriverTable::cuMemFreeAsync_v11020, address, stream); }, [this] { forget(); });
}

Result<void> StreamOrderedMemory::require(const char* operation) const {
    if (!empty()) return ok();
    return Operation(operation).invalid("the StreamOrderedBuffer is empty (moved from or freed)");
}

Result<void> finish_on_stream(Result<void> issued, CUstream stream) {
    if (!issued) return issued;
    return call_driver(&DriverTable::cuStreamSynchronize_v2000, stream);
}

}  // namespace cudyn::detail
