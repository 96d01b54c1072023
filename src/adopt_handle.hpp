// cudyn — a PhysicalMemory around a generic allocation handle this process
// holds a reference to but did not create (shareable_memory.cpp); private to src/.
#pragma once

#include "cudyn/physical_memory.hpp"
#include "cudyn/result.hpp"
#include "cudyn/shareable_memory.hpp"

#include <cuda.h>

namespace cudyn::detail {

// Takes over `handle` (an import, or a cuMemRetainAllocationHandle): its
// properties are read from the driver (cuMemGetAllocationPropertiesFromHandle)
// and its granularity from this process's driver, info.granularity where the
// driver cannot say; info.size_bytes is its size. The handle is released
// (cuMemRelease) by the PhysicalMemory, or here when a step fails.
Result<PhysicalMemory> adopt_imported(CUmemGenericAllocationHandle handle, const ShareableMemoryInfo& info,
                                      const char* operation);

}  // namespace cudyn::detail
