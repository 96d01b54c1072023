// cudyn — the release function of cuMemAlloc and cuMemAllocManaged memory
// (device_buffer.cpp); private to src/.
#pragma once

#include "cudyn/result.hpp"

#include <cstdint>

namespace cudyn::detail {

// cuMemFree_v2: the release function of device and managed allocations.
Result<void> free_device_memory(std::uintptr_t address);

}  // namespace cudyn::detail
