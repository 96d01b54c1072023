// cudyn — driver answers that mean "no fabric on this system" (shareable_memory.cpp); private to src/.
#pragma once

#include "cudyn/error.hpp"

#include <cuda.h>

namespace cudyn::detail {

// Driver answers to a fabric handle that mean "no fabric on this system" (no
// IMEX channel or service) rather than a bug, and the NotSupported they
// become, naming the operation and what fabric sharing needs. fabric_error
// applies the two: `error` as that NotSupported when it is such an answer,
// else unchanged.
bool refuses_fabric(CUresult result);
Error no_fabric(Error error, const char* operation);
Error fabric_error(Error error, const char* operation);

}  // namespace cudyn::detail
