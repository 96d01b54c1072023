// cudyn — private to the pool module: how the library's sharing sources build
// the MemoryPool of an imported pool or of a pointer's pool, the pools the
// driver must not destroy, and the device check pools and buffers share.
#pragma once

#include "cudyn/core/location.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/vmm/allocation_properties.hpp"

#include "core/internal.hpp"

#include <cuda.h>

#include <mutex>
#include <utility>
#include <vector>

namespace cudyn::detail {

// MemoryPool's one friend: the entry points through which other sources
// (share/) build pools and mark them exported.
struct PoolAccess {
    // The importer's MemoryPool of an exported pool: owned (destroyed with
    // it), living at `location`, with the exporter's `origin` and the handle
    // type it was imported through.
    static MemoryPool imported(CUmemoryPool pool, const Location& location, const PoolOrigin& origin,
                               HandleType type) noexcept {
        MemoryPool::Held held;
        held.pool = pool;
        held.owned = true;
        held.location = location;
        held.imported = true;
        held.origin = origin;
        held.handle_types = type;
        held.listed = import_open(LiveImport{ImportKind::Pool,
                                             location.kind() == LocationKind::Device ? location.id() : -1,
                                             reinterpret_cast<std::uintptr_t>(pool), 0});
        return MemoryPool(std::move(held));
    }
    // A pool of this process found from one of its pointers
    // (CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE), with the handle types its memory
    // reports (CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES), so that it can be
    // exported: not owned, never destroyed through this object.
    static MemoryPool borrowed(CUmemoryPool pool, const Location& location, HandleType types) noexcept {
        return MemoryPool(pool, false, location, types);
    }
    // Notes that export_pool_fd / export_pool_fabric shared the pool
    // (MemoryPool::exported).
    static void mark_exported(const MemoryPool& pool) noexcept { pool.held_->exported.value.store(true); }
};

// Marks a pool the driver cannot destroy safely (one whose fabric export the
// driver refused; see export_pool_fabric): its owner then lets go of it
// without calling the driver.
void keep_pool_from_destroy(CUmemoryPool pool) noexcept;

// NotSupported from `operation` unless `caps` (device `ordinal`'s) report
// MEMORY_POOLS_SUPPORTED.
Result<void> require_memory_pools(const DeviceCapabilities& caps, int ordinal, const Operation& operation);

// A process-wide list of pool handles behind its own lock (a handful of
// entries at most): the pools the driver must not destroy, the pools with
// live imported pointers. A pool may be listed more than once.
class PoolHandleList {
public:
    void add(CUmemoryPool pool);             // std::bad_alloc when out of memory
    bool take(CUmemoryPool pool) noexcept;   // removes one entry; false when there was none
    bool contains(CUmemoryPool pool) const;

private:
    mutable std::mutex mutex_;
    std::vector<CUmemoryPool> pools_;
};

}  // namespace cudyn::detail
