// cudyn — StreamOrderedMemory: cuMemAllocAsync / cuMemAllocFromPoolAsync and
// cuMemFreeAsync, with the checks made before the driver.
#include "cudyn/stream_ordered_buffer.hpp"
#include "cudyn/driver_call.hpp"

#include "device_facts.hpp"
#include "entry_check.hpp"

#include <string>
#include <utility>

namespace cudyn::detail {

namespace {

// NotSupported when the context's device reports no MEMORY_POOLS_SUPPORTED
// (from the per-device cache: no driver call after the first).
Result<void> require_pool_device(const OwnerContext& context) {
    if (context.empty()) return ok();  // no current context: the driver says so
    const auto ordinal = static_cast<int>(context.device());
    CUDYN_TRY_ASSIGN(const auto caps, capabilities(ordinal, context.device()));
    if (!caps.memory_pools)
        return Error::not_supported({}, "StreamOrderedBuffer::allocate: device " + std::to_string(ordinal) +
                                            " does not support memory pools "
                                            "(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0)");
    return ok();
}

}  // namespace

Result<StreamOrderedMemory> StreamOrderedMemory::allocate(std::size_t count, std::size_t element_size,
                                                          const MemoryPool* pool, StreamRef stream) {
    CUDYN_TRY_ASSIGN(const std::size_t bytes, checked_bytes(count, element_size, "StreamOrderedBuffer::allocate"));
    if (pool != nullptr && pool->empty())
        return Error::invalid_argument("StreamOrderedBuffer::allocate: the pool is empty (moved from or destroyed)");
    if (pool != nullptr)
        CUDYN_TRY(require_entry(&DriverTable::cuMemAllocFromPoolAsync_v11020));
    else
        CUDYN_TRY(require_entry(&DriverTable::cuMemAllocAsync_v11020));
    OwnerContext context;
    if (stream.context() != nullptr) {
        context = *stream.context();
    } else {
        CUDYN_TRY_ASSIGN(context, OwnerContext::current());
    }
    // A pool exists only where pools do; the current pool needs the check.
    if (pool == nullptr) CUDYN_TRY(require_pool_device(context));
    CUdeviceptr address = 0;
    if (pool != nullptr)
        CUDYN_TRY(call_driver(&DriverTable::cuMemAllocFromPoolAsync_v11020, &address, bytes, pool->handle(),
                              stream.handle()));
    else
        CUDYN_TRY(call_driver(&DriverTable::cuMemAllocAsync_v11020, &address, bytes, stream.handle()));
    return StreamOrderedMemory(Traits::State{address, bytes, stream.handle(), std::move(context)});
}

Result<void> StreamOrderedMemory::Traits::release(State& state) {
    const auto free = [&state] { return call_driver(&DriverTable::cuMemFreeAsync_v11020, state.address, state.stream); };
    // A created stream names its own context to the driver, so the free needs
    // no context made current (saving a cuCtxGetCurrent per free); the default
    // streams mean "the current context's", which must then be this memory's.
    const bool default_stream =
        state.stream == nullptr || state.stream == CU_STREAM_LEGACY || state.stream == CU_STREAM_PER_THREAD;
    if (default_stream) {
        CUDYN_TRY(state.context.release_into(free));
    } else {
        CUDYN_TRY(free());
    }
    state = State{};
    return ok();
}

Result<void> StreamOrderedMemory::require(const char* operation) const {
    if (!empty()) return ok();
    return Error::invalid_argument(std::string(operation) + ": the StreamOrderedBuffer is empty (moved from or freed)");
}

Result<void> finish_on_stream(Result<void> issued, CUstream stream) {
    if (!issued) return issued;
    return call_driver(&DriverTable::cuStreamSynchronize_v2000, stream);
}

}  // namespace cudyn::detail
