// cudyn — private to the sharing module.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"
#include "cudyn/vmm/physical_memory.hpp"

#include "core/internal.hpp"

#include <cuda.h>

#include <cstdint>

namespace cudyn::detail {

// Takes over `handle` (an import, or a cuMemRetainAllocationHandle): its
// properties are read from the driver (cuMemGetAllocationPropertiesFromHandle)
// and its granularity from this process's driver, info.granularity where the
// driver cannot say; info.size_bytes is its size. The handle is released
// (cuMemRelease) by the PhysicalMemory, or here when a step fails.
Result<PhysicalMemory> adopt_imported(CUmemGenericAllocationHandle handle, const PhysicalMemoryInfo& info,
                                      const Operation& operation);

// The part of an allocation a record shares: InvalidArgument from `record`
// for a size of 0 or a part that runs past the allocation.
Result<void> check_shared_part(const Operation& record, std::uint64_t offset, std::uint64_t size,
                               std::uint64_t allocation_size);

// The pools this process holds imported pointers of (ImportedPoolMemory):
// memory from them was imported, so it has no handle of its own to export.
void note_pool_import(CUmemoryPool pool);
void forget_pool_import(CUmemoryPool pool) noexcept;
bool has_pool_imports(CUmemoryPool pool);

}  // namespace cudyn::detail
