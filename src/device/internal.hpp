// cudyn — private to the device module (IpcEvent's query uses completion() too).
#pragma once

#include "cudyn/core/error.hpp"
#include "cudyn/core/result.hpp"

#include <cuda.h>

#include <utility>

namespace cudyn::detail {

// InvalidArgument "device ordinal 3 is out of range: 2 device(s) visible",
// for an ordinal outside [0, visible).
Error ordinal_out_of_range(int ordinal, int visible);

// true when the queried work is done, false while it runs
// (CUDA_ERROR_NOT_READY is an answer, not a failure), any other error as is.
inline Result<bool> completion(Result<void> queried) {
    if (queried) return true;
    if (queried.error().driver_result == CUDA_ERROR_NOT_READY) return false;
    return std::move(queried).error();
}

}  // namespace cudyn::detail
