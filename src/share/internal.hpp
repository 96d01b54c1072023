// cudyn — private to the sharing module.
#pragma once

#include "cudyn/core/live_imports.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/share/allocation_sharing.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"
#include "cudyn/vmm/physical_memory.hpp"

#include "core/internal.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace cudyn::detail {

// Takes over `handle` (an import, or a cuMemRetainAllocationHandle): its
// properties are read from the driver (cuMemGetAllocationPropertiesFromHandle)
// and its granularity from this process's driver, info.granularity where the
// driver cannot say; info.size_bytes is its size. The handle is released
// (cuMemRelease) by the PhysicalMemory, or here when a step fails.
Result<PhysicalMemory> adopt_imported(CUmemGenericAllocationHandle handle, const PhysicalMemoryInfo& info,
                                      const Operation& operation);
// Lists imported memory in live_imports() as `kind` (by its handle), until
// it is released. ImportedRange takes its chunks off the list again: the
// range is listed instead.
void list_import(const PhysicalMemory& memory, ImportKind kind) noexcept;

// Where the VMM allocation mapped at an address lies: the mapping, which is
// one physical allocation mapped whole at offset 0 (cuMemMap takes no other
// offset).
struct VmmMapping {
    std::uint64_t base = 0;
    std::size_t size = 0;
};
// CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR / MAPPING_SIZE of `address`:
// NotSupported before CUDA 11.7, the driver's INVALID_VALUE where nothing is mapped.
Result<VmmMapping> read_mapping(CUdeviceptr address);
// cuMemRetainAllocationHandle: a reference to the physical allocation mapped
// at `address` (the caller releases it), or nothing when it is not VMM
// memory or the driver has no such entry.
Result<std::optional<CUmemGenericAllocationHandle>> retain_vmm(CUdeviceptr address);
// The VMM memory's own export: a POSIX file descriptor where it has the
// type, else a fabric handle where this machine shares them; NotSupported
// naming why otherwise.
Result<AllocationParts> export_vmm_parts(const PhysicalMemory& memory, int fallback_device);

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
