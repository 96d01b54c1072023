// cudyn — private to the device module.
#pragma once

#include "cudyn/core/result.hpp"

#include <cuda.h>

#include <utility>

namespace cudyn::detail {

// true when the queried work is done, false while it runs
// (CUDA_ERROR_NOT_READY is an answer, not a failure), any other error as is.
inline Result<bool> completion(Result<void> queried) {
    if (queried) return true;
    if (queried.error().driver_result == CUDA_ERROR_NOT_READY) return false;
    return std::move(queried).error();
}

}  // namespace cudyn::detail
