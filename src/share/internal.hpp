// cudyn — private to the sharing module.
#pragma once

#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"

#include <cuda.h>


namespace cudyn::detail {

// Takes over `handle` (an import, or a cuMemRetainAllocationHandle): its
// properties are read from the driver (cuMemGetAllocationPropertiesFromHandle)
// and its granularity from this process's driver, info.granularity where the
// driver cannot say; info.size_bytes is its size. The handle is released
// (cuMemRelease) by the PhysicalMemory, or here when a step fails.
Result<PhysicalMemory> adopt_imported(CUmemGenericAllocationHandle handle, const PhysicalMemoryInfo& info,
                                      const char* operation);

}  // namespace cudyn::detail
