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

// Runs a stream-ordered allocation or free. On a created stream the driver
// takes the device, the pool and the order from the stream, whatever
// context is current (it allocates and frees on a stream of device 0 with
// device 1's context current, or with none): no context query and no
// switch, the allocation's whole cost being the driver's. A default stream
// is the calling thread's context's, so there `context` (where known) is
// made current for the call and the caller's put back.
template <typename Call>
Result<void> in_allocation_context(bool default_stream, CUcontext context, Call&& call) {
    if (!default_stream) return call();
    return in_context(context, std::forward<Call>(call));
}

}  // namespace

Result<StreamOrderedMemory> StreamOrderedMemory::allocate(std::size_t count, std::size_t element_size,
                                                          const MemoryPool* pool, StreamRef stream) {
    CUDYN_TRY_ASSIGN(const std::size_t bytes, checked_bytes(count, element_size, "StreamOrderedBuffer::allocate: count"));
    if (pool != nullptr && pool->empty()) return kAllocate.invalid("the pool is empty (moved from or destroyed)");
    if (pool != nullptr)
        CUDYN_TRY(require_entry(&DriverTable::cuMemAllocFromPoolAsync_v11020));
    else
        CUDYN_TRY(require_entry(&DriverTable::cuMemAllocAsync_v11020));
    // A created cudyn Stream keeps its context alive, and the stream must
    // still exist when the memory is freed on it (as for any stream-ordered
    // call), so the memory relies on it: no retain of its own, no driver call
    // and no atomic reference count per allocation. A default stream or a
    // raw handle names no context of its own: then the current one is
    // retained, as every other owner does.
    const OwnerContext* context = stream.context();
    OwnerContext retained;
    if (context == nullptr) {
        CUDYN_TRY_ASSIGN(retained, OwnerContext::current());
        context = &retained;
    }
    // A pool exists only where pools do; the current pool needs the check.
    if (pool == nullptr) CUDYN_TRY(require_pool_device(*context));
    CUdeviceptr address = 0;
    CUDYN_TRY(in_allocation_context(stream.is_default(), stream.context_handle(), [&]() -> Result<void> {
        if (pool != nullptr)
            return call_driver(&DriverTable::cuMemAllocFromPoolAsync_v11020, &address, bytes, pool->handle(),
                               stream.handle());
        return call_driver(&DriverTable::cuMemAllocAsync_v11020, &address, bytes, stream.handle());
    }));
    const CUcontext allocated_in = context->handle();  // before `retained` moves (it may be `context`)
    const int device = context->empty() ? -1 : static_cast<int>(context->device());
    Held held{std::move(retained), address, bytes, stream.handle(), allocated_in, allocated_in, {}, false};
    // Known from the pool, so its copies take the route the driver accepts
    // without a refused try first (the current pool is always the device's).
    held.host_located = pool != nullptr && pool->location().kind() != LocationKind::Device;
    held.ledger = ledger_open(MemoryKind::StreamOrdered, device, bytes, static_cast<std::uintptr_t>(address));
    return StreamOrderedMemory(std::move(held));
}

Result<void> StreamOrderedMemory::Held::release() {
    const auto free = [this] { return call_driver(&DriverTable::cuMemFreeAsync_v11020, address, stream); };
    const auto forget = [this] { *this = Held{}; };  // the retain, if any, goes after the free
    // A created stream needs no context current (see in_allocation_context);
    // a default stream means "the current context's", which must then be
    // this memory's (stream_context is the allocation's for a default
    // stream), made current and the caller's put back.
    if (!StreamRef(stream).is_default()) {
        Result<void> freed = free();
        if (freed) forget();
        return freed;
    }
    return release_in_context(stream_context != nullptr ? stream_context : context, free, forget);
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
