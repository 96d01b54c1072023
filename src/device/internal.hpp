// cudyn — private to the device module (IpcEvent's query uses completion() too).
#pragma once

#include "cudyn/core/error.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/device/stream_ref.hpp"
#include "cudyn/loader/driver_call.hpp"

#include <cuda.h>

#include <utility>

namespace cudyn::detail {

// InvalidArgument "Device::get: device ordinal 3 is out of range: 2 device(s)
// visible", for an ordinal outside [0, visible), naming `operation`.
Error ordinal_out_of_range(const char* operation, int ordinal, int visible);

// true when the queried work is done, false while it runs
// (CUDA_ERROR_NOT_READY is an answer, not a failure), any other error as is.
inline Result<bool> completion(Result<void> queried) {
    if (queried) return true;
    if (queried.error().driver_result == CUDA_ERROR_NOT_READY) return false;
    return std::move(queried).error();
}

// Runs `call` with `stream`'s context current (and the caller's put back):
// the driver runs stream work in the calling thread's context, and refuses
// (cuMemcpyDtoHAsync: INVALID_VALUE) a stream of another context. Without a
// known context (a raw handle, a default stream) the thread's context stays.
template <typename Call>
auto in_stream_context(const StreamRef& stream, Call&& call) -> decltype(call()) {
    return in_context(stream.context_handle(), std::forward<Call>(call));
}

// The memory pool `address` was allocated from
// (CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE): null for memory of no pool, and
// where the driver cannot say (before 11.2, an address it does not know).
// One driver call, so asked only once the driver has refused something, to
// find out why.
inline CUmemoryPool pool_of(CUdeviceptr address) noexcept {
    CUmemoryPool pool = nullptr;
    if (!call_driver(&DriverTable::cuPointerGetAttribute_v4000, static_cast<void*>(&pool),
                     CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, address))
        return nullptr;
    return pool;
}

}  // namespace cudyn::detail
