// cudyn — facts about the visible devices that cannot change while the
// driver stays loaded, read from the driver once and then from memory.
//
// CUDA fixes the set of visible devices and their attributes at cuInit
// (CUDA_VISIBLE_DEVICES is read then), and cudyn never unloads the driver, so
// the answers stay true for the life of the process. The per-call checks of
// advice and prefetch use them: without the cache each advice paid four
// driver calls (two device counts, cuDeviceGet, cuDeviceGetAttribute) of
// checks, 14% on top of a 755 ns cuMemAdvise_v2 on an H200.
//
// A failed query is not cached: the next call asks the driver again.
#pragma once

#include "cudyn/result.hpp"

namespace cudyn::detail {

// cuDeviceGetCount, once.
Result<int> visible_device_count();

// CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS of device `ordinal`, once
// per device; `ordinal` must be in [0, visible_device_count()).
Result<bool> concurrent_managed_access(int ordinal);

}  // namespace cudyn::detail
