// fakecuda_pools.cpp — memory pools (CUDA 11.2's cuMemPool* family, CUDA 13's
// location-keyed pool queries) on host memory: pool objects and their chunks,
// default and current pools, attributes, access, trimming and deferred
// destruction. Blocks are handed out in fakecuda_pool_alloc.cpp and shared in
// fakecuda_pool_sharing.cpp; README.md describes the model.
#include "fake_pools.hpp"
#include "fake_enum.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace fake::mempool {

namespace {
constexpr std::size_t kChunk = std::size_t{2} << 20;  // reservation granularity
}  // namespace

bool tag_done(const FreeTag& tag) {
    if (!tag.pending()) return true;
    const std::shared_ptr<Queue> queue = tag.queue.lock();
    return !queue || queue->completed >= tag.seq;
}

// Guarded by State::mu like everything else.
Pools& pools() {
    static Pools* p = new Pools();
    return *p;
}

bool live_pool(const Pool* pool) { return pool != nullptr && pools().all.count(const_cast<Pool*>(pool)) != 0 && !pool->destroyed; }

bool releases_memory(const Pool* pool) { return !pool->imported && pool->handle_types == 0; }

void note_usage(Pool* pool) {
    pool->reserved_high = std::max(pool->reserved_high, pool->reserved);
    pool->used_high = std::max(pool->used_high, pool->used);
}

Key key_of(const Pool* pool) {
    return {pool->location_type, pool->location_type == CU_MEM_LOCATION_TYPE_HOST ? 0 : pool->location_id};
}

Pool* default_pool(const Key& key) {
    auto& defaults = pools().defaults;
    auto it = defaults.find(key);
    if (it != defaults.end()) return it->second;
    auto* pool = new Pool();
    pool->location_type = key.first;
    pool->location_id = key.second;
    pool->device = key.first == CU_MEM_LOCATION_TYPE_DEVICE ? key.second : -1;
    pool->is_default = true;
    pools().all.insert(pool);
    defaults.emplace(key, pool);
    return pool;
}

Pool* current_pool(const Key& key) {
    auto it = pools().current.find(key);
    return it != pools().current.end() ? it->second : default_pool(key);
}

CUresult check_pools_supported(const State& st, int device) {
    return fake::attribute(st, device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) != 0 ? CUDA_SUCCESS
                                                                                       : CUDA_ERROR_NOT_SUPPORTED;
}

// ---- chunks -------------------------------------------------------------------------------------

namespace {

void unmap_chunk(const Pool* pool, const Chunk& chunk) {
#if defined(__linux__)
    if (pool->fd >= 0) {
        ::munmap(chunk.mapping, chunk.size);
        return;
    }
#else
    (void)pool;
#endif
    fake::unmap_memory(chunk.mapping, chunk.size);
}

void release_chunk(State& st, Pool* pool, std::map<std::uintptr_t, Chunk>::iterator chunk) {
    const std::uintptr_t base = chunk->first;
    const std::size_t size = chunk->second.size;
    unmap_chunk(pool, chunk->second);
    for (auto seg = pool->segments.lower_bound(base); seg != pool->segments.end() && seg->first < base + size;)
        seg = pool->segments.erase(seg);
    pools().chunk_ranges.erase(base);
    pool->reserved -= size;
    if (pool->device >= 0) {
        auto& in_use = st.devices[static_cast<std::size_t>(pool->device)].bytes_in_use;
        in_use -= std::min<unsigned long long>(in_use, size);
    }
    pool->chunks.erase(chunk);
}

}  // namespace

std::map<std::uintptr_t, Segment>::iterator reserve_chunk(State& st, Pool* pool, std::size_t need) {
    const auto none = pool->segments.end();
    std::size_t size = round_up(std::max(need, kChunk), kChunk);
    if (pool->max_size != 0) {
        // A pool never reserves beyond its maxSize: the last chunk is cut to fit.
        if (pool->reserved >= pool->max_size) return none;
        const std::size_t room = static_cast<std::size_t>(pool->max_size - pool->reserved) / fake::kPageSize * fake::kPageSize;
        if (room < round_up(need, fake::kPageSize)) return none;
        size = std::min(size, room);
    }
    if (pool->device >= 0 &&
        size > fake::kTotalMemory - st.devices[static_cast<std::size_t>(pool->device)].bytes_in_use)
        return none;
    Chunk chunk;
    chunk.size = size;
#if defined(__linux__)
    if (pool->fd >= 0) {
        if (::ftruncate(pool->fd, static_cast<off_t>(pool->next_offset + size)) != 0) return none;
        void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, pool->fd,
                         static_cast<off_t>(pool->next_offset));
        if (m == MAP_FAILED) return none;
        chunk.mapping = m;
        chunk.file_offset = pool->next_offset;
        pool->next_offset += size;
    }
#endif
    if (chunk.mapping == nullptr) {
        std::size_t mapped = 0;
        chunk.mapping = fake::map_memory(size, &mapped);
        if (chunk.mapping == nullptr) return none;
    }
    const auto base = reinterpret_cast<std::uintptr_t>(chunk.mapping);
    pool->chunks.emplace(base, chunk);
    pools().chunk_ranges.emplace(base, size);
    pool->reserved += size;
    if (pool->device >= 0) st.devices[static_cast<std::size_t>(pool->device)].bytes_in_use += size;
    note_usage(pool);
    Segment free;
    free.size = size;
    free.chunk = base;
    return pool->segments.emplace(base, free).first;
}

// Adjacent free pieces of one chunk become one when they may be handed out
// under the same rule: both available to all, or freed on the same stream.
void coalesce(Pool* pool) {
    auto& segments = pool->segments;
    for (auto it = segments.begin(); it != segments.end();) {
        auto next = std::next(it);
        if (next == segments.end()) break;
        Segment& a = it->second;
        const Segment& b = next->second;
        const bool mergeable = a.block == 0 && b.block == 0 && a.quarantine < 0 && b.quarantine < 0 &&
                               a.chunk == b.chunk && it->first + a.size == next->first &&
                               (a.tag.serial == b.tag.serial);
        if (!mergeable) {
            it = next;
            continue;
        }
        a.size += b.size;
        a.tag.seq = std::max(a.tag.seq, b.tag.seq);
        segments.erase(next);
    }
}

// Whole chunks that hold nothing and no pending free, top down, while the
// pool keeps at least `keep` bytes reserved.
void release_free_chunks(State& st, Pool* pool, std::uint64_t keep) {
    for (auto chunk = pool->chunks.end(); chunk != pool->chunks.begin();) {
        --chunk;
        if (pool->reserved < keep + chunk->second.size) continue;
        bool idle = true;
        const std::uintptr_t base = chunk->first;
        for (auto seg = pool->segments.lower_bound(base); seg != pool->segments.end() && seg->first < base + chunk->second.size; ++seg)
            idle = idle && seg->second.block == 0 && seg->second.quarantine < 0 && tag_done(seg->second.tag);
        if (!idle) continue;
        auto doomed = chunk;
        chunk = std::next(chunk);
        release_chunk(st, pool, doomed);
    }
}

// ---- pool lifetime ------------------------------------------------------------------------------

namespace {

void final_release(State& st, Pool* pool) {
    while (!pool->chunks.empty()) release_chunk(st, pool, pool->chunks.begin());
#if defined(__linux__)
    if (pool->header != nullptr) ::munmap(pool->header, kHeaderBytes);
    if (pool->fd >= 0) ::close(pool->fd);
#endif
    for (auto it = pools().current.begin(); it != pools().current.end();)
        it = it->second == pool ? pools().current.erase(it) : std::next(it);
    pools().all.erase(pool);
    delete pool;
}

}  // namespace

void maybe_destroy(State& st, Pool* pool) {
    if (pool->destroyed && pool->blocks == 0 && pool->pending == 0) final_release(st, pool);
}

}  // namespace fake::mempool

using namespace fake::mempool;
using fake::State;

// ---- entry points -----------------------------------------------------------------------------------

#if FAKE_HAS(11020)

namespace {

// Who decides whether host pools work: the first device, as for host VMM.
constexpr int kHostJudge = 0;

// A pinned-memory location as pools key it; HOST pools exist from CUDA 13,
// HOST_NUMA ones from 12.2 (an older driver does not know the location).
CUresult pinned_key(const State& st, const CUmemLocation& loc, Key* key) {
    switch (fake::raw(loc.type)) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        if (!fake::valid_device(st, loc.id)) return CUDA_ERROR_INVALID_DEVICE;
        if (CUresult rc = check_pools_supported(st, loc.id)) return rc;
        *key = {CU_MEM_LOCATION_TYPE_DEVICE, loc.id};
        return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        if (!FAKE_HAS(12020)) return CUDA_ERROR_INVALID_VALUE;
        if (loc.id < 0 || loc.id >= st.numa_nodes) return CUDA_ERROR_INVALID_VALUE;
        if (fake::attribute(st, kHostJudge, CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED) == 0)
            return CUDA_ERROR_NOT_SUPPORTED;
        *key = {CU_MEM_LOCATION_TYPE_HOST_NUMA, loc.id};
        return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
        if (!FAKE_HAS(13000)) return CUDA_ERROR_INVALID_VALUE;
        if (fake::attribute(st, kHostJudge, CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED) == 0)
            return CUDA_ERROR_NOT_SUPPORTED;
        *key = {CU_MEM_LOCATION_TYPE_HOST, 0};
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;  // HOST_NUMA_CURRENT included, as cuMemPoolCreate documents
    }
}

// The device whose MEMPOOL_SUPPORTED_HANDLE_TYPES decides a pool's handle types.
int handle_judge(const Key& key) { return key.first == CU_MEM_LOCATION_TYPE_DEVICE ? key.second : kHostJudge; }

CUresult check_handle_types(const State& st, const Key& key, unsigned types) {
    const unsigned known = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_WIN32 |
                           CU_MEM_HANDLE_TYPE_WIN32_KMT | CU_MEM_HANDLE_TYPE_FABRIC;
    if (types & ~known) return CUDA_ERROR_INVALID_VALUE;
    if (types == 0) return CUDA_SUCCESS;
    if (key.first == CU_MEM_LOCATION_TYPE_HOST) return CUDA_ERROR_INVALID_VALUE;  // "not IPC capable"
    const auto supported =
        static_cast<unsigned>(fake::attribute(st, handle_judge(key), CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES));
    return (types & ~supported) ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS;
}

bool all_zero(const unsigned char* bytes, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        if (bytes[i] != 0) return false;
    return true;
}

// ---- entries' bodies ----------------------------------------------------------------------------

CUresult pool_create(CUmemoryPool* out, const CUmemPoolProps* props) {
    State& st = fake::state();
    if (!out || !props) return CUDA_ERROR_INVALID_VALUE;
    const int alloc_type = fake::raw(props->allocType);
    if (alloc_type == CU_MEM_ALLOCATION_TYPE_MANAGED && FAKE_HAS(13000)) return CUDA_ERROR_NOT_SUPPORTED;  // no HMM
    if (alloc_type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    if (!all_zero(props->reserved, sizeof props->reserved) || props->win32SecurityAttributes != nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    // Drivers before these fields existed read their bytes as reserved.
    if (!FAKE_HAS(12020) && props->maxSize != 0) return CUDA_ERROR_INVALID_VALUE;
    if (!FAKE_HAS(12080) && props->usage != 0) return CUDA_ERROR_INVALID_VALUE;
    Key key;
    if (CUresult rc = pinned_key(st, props->location, &key)) return rc;
    const auto types = static_cast<unsigned>(fake::raw(props->handleTypes));
    if (CUresult rc = check_handle_types(st, key, types)) return rc;
    if (props->usage & ~static_cast<unsigned>(CU_MEM_POOL_CREATE_USAGE_HW_DECOMPRESS)) return CUDA_ERROR_INVALID_VALUE;
    if (props->usage != 0) return CUDA_ERROR_NOT_SUPPORTED;  // no decompression engine on the emulated device
    auto* pool = new Pool();
    pool->location_type = key.first;
    pool->location_id = key.second;
    pool->device = key.first == CU_MEM_LOCATION_TYPE_DEVICE ? key.second : -1;
    pool->handle_types = types;
    pool->max_size = props->maxSize;
    if (types != 0) {
        if (CUresult rc = make_shareable(pool)) {
            delete pool;
            return rc;
        }
    }
    pools().all.insert(pool);
    *out = pool;
    return CUDA_SUCCESS;
}

CUresult pool_destroy(CUmemoryPool pool) {
    State& st = fake::state();
    sweep(st);
    if (!live_pool(pool) || pool->is_default) return CUDA_ERROR_INVALID_VALUE;
    if (pool->fabric_export_refused) {
        // Driver 580 died with SIGSEGV here (a pool whose fabric export it had
        // refused for want of an IMEX channel): a caller must never get here,
        // and the fake makes the mistake as loud as the driver did.
        std::fprintf(stderr,
                     "fakecuda: cuMemPoolDestroy of a pool whose fabric export was refused (NOT_PERMITTED): the "
                     "real driver crashed here; aborting\n");
        std::fflush(stderr);
        std::abort();
    }
    pool->destroyed = true;
    // The default pool is current again where this one was.
    for (auto it = pools().current.begin(); it != pools().current.end();)
        it = it->second == pool ? pools().current.erase(it) : std::next(it);
    maybe_destroy(st, pool);
    return CUDA_SUCCESS;
}

CUresult set_attribute(CUmemoryPool pool, int attr, const void* value) {
    State& st = fake::state();
    sweep(st);
    if (!live_pool(pool) || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    int flag = 0;
    cuuint64_t bytes = 0;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        std::memcpy(&flag, value, sizeof flag);
        (attr == CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES ? pool->follow_events
         : attr == CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC ? pool->opportunistic
                                                             : pool->internal_dependencies) = flag != 0 ? 1 : 0;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        std::memcpy(&bytes, value, sizeof bytes);
        pool->release_threshold = bytes;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        // Only 0, which resets the watermark to the current value.
        std::memcpy(&bytes, value, sizeof bytes);
        if (bytes != 0) return CUDA_ERROR_INVALID_VALUE;
        if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
            pool->reserved_high = pool->reserved;
        else
            pool->used_high = pool->used;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;  // the *_CURRENT statistics are read-only
    }
}

CUresult get_attribute(CUmemoryPool pool, int attr, void* value) {
    State& st = fake::state();
    sweep(st);
    if (!live_pool(pool) || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const auto put_int = [value](int v) { std::memcpy(value, &v, sizeof v); };
    const auto put_bytes = [value](cuuint64_t v) { std::memcpy(value, &v, sizeof v); };
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: put_int(pool->follow_events); return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: put_int(pool->opportunistic); return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: put_int(pool->internal_dependencies); return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: put_bytes(pool->release_threshold); return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: put_bytes(pool->reserved); return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: put_bytes(pool->reserved_high); return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: put_bytes(pool->used); return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: put_bytes(pool->used_high); return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

// Who owns a pool's memory: its device, or the host for host pools.
bool is_owner(const Pool* pool, const CUmemLocation& loc) {
    const int type = fake::raw(loc.type);
    if (pool->location_type == CU_MEM_LOCATION_TYPE_DEVICE) return type == CU_MEM_LOCATION_TYPE_DEVICE && loc.id == pool->device;
    return type == CU_MEM_LOCATION_TYPE_HOST || type == CU_MEM_LOCATION_TYPE_HOST_NUMA;
}

CUresult set_access(CUmemoryPool pool, const CUmemAccessDesc* map, std::size_t count) {
    State& st = fake::state();
    if (!live_pool(pool) || map == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
    for (std::size_t i = 0; i < count; ++i) {
        const CUmemLocation& loc = map[i].location;
        const int type = fake::raw(loc.type);
        const int flags = fake::raw(map[i].flags);
        if (flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
        if (type == CU_MEM_LOCATION_TYPE_DEVICE) {
            if (!fake::valid_device(st, loc.id)) return CUDA_ERROR_INVALID_DEVICE;
        } else if (type != CU_MEM_LOCATION_TYPE_HOST && type != CU_MEM_LOCATION_TYPE_HOST_NUMA) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        if (is_owner(pool, loc)) {
            // The owner's access cannot be revoked.
            if (flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) return CUDA_ERROR_INVALID_VALUE;
            continue;
        }
        if (type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;  // host access to device pools
        // Another device reaches the memory only over a peer path.
        if (pool->device >= 0 && flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && st.peer[loc.id][pool->device] == 0)
            return CUDA_ERROR_INVALID_DEVICE;
    }
    for (std::size_t i = 0; i < count; ++i) {
        if (is_owner(pool, map[i].location)) continue;
        pool->access[{CU_MEM_LOCATION_TYPE_DEVICE, map[i].location.id}] = static_cast<unsigned long long>(fake::raw(map[i].flags));
    }
    return CUDA_SUCCESS;
}

CUresult get_access(CUmemAccess_flags* flags, CUmemoryPool pool, const CUmemLocation* location) {
    State& st = fake::state();
    if (!flags || !location || !live_pool(pool)) return CUDA_ERROR_INVALID_VALUE;
    const int type = fake::raw(location->type);
    if (type == CU_MEM_LOCATION_TYPE_DEVICE && !fake::valid_device(st, location->id)) return CUDA_ERROR_INVALID_DEVICE;
    if (type != CU_MEM_LOCATION_TYPE_DEVICE && type != CU_MEM_LOCATION_TYPE_HOST && type != CU_MEM_LOCATION_TYPE_HOST_NUMA)
        return CUDA_ERROR_INVALID_VALUE;
    int value = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    if (is_owner(pool, *location)) {
        value = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    } else if (type == CU_MEM_LOCATION_TYPE_DEVICE) {
        auto it = pool->access.find({CU_MEM_LOCATION_TYPE_DEVICE, location->id});
        if (it != pool->access.end()) value = static_cast<int>(it->second);
    }
    std::memcpy(flags, &value, sizeof value);
    return CUDA_SUCCESS;
}

// CUDA 13's (location, allocation type) key. Managed memory has pools of its
// own per location: an H200 with driver 580 (no HMM) answered
// cuMemGetDefaultMemPool(MANAGED) with a pool for device 0 and for the host,
// and cuMemGetMemPool with the same one. They are keyed apart from the pinned
// pools (kManagedKey added to the location type); allocating from them is
// not modelled.
constexpr int kManagedKey = 0x100;
[[maybe_unused]] CUresult typed_key(const State& st, const CUmemLocation* location, int type, Key* key) {
    if (!location) return CUDA_ERROR_INVALID_VALUE;
    if (type == CU_MEM_ALLOCATION_TYPE_MANAGED) {
        const int where = fake::raw(location->type);
        if (where == CU_MEM_LOCATION_TYPE_DEVICE && !fake::valid_device(st, location->id)) return CUDA_ERROR_INVALID_DEVICE;
        if (where == CU_MEM_LOCATION_TYPE_HOST_NUMA && (location->id < 0 || location->id >= st.numa_nodes))
            return CUDA_ERROR_INVALID_VALUE;
        if (where != CU_MEM_LOCATION_TYPE_DEVICE && where != CU_MEM_LOCATION_TYPE_HOST &&
            where != CU_MEM_LOCATION_TYPE_HOST_NUMA)
            return CUDA_ERROR_INVALID_VALUE;
        *key = {kManagedKey + where, where == CU_MEM_LOCATION_TYPE_HOST ? 0 : location->id};
        return CUDA_SUCCESS;
    }
    if (type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    return pinned_key(st, *location, key);
}

}  // namespace

FAKE_API CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
    FAKE_ENTER(fake::kNeedsInit);
    return pool_create(pool, poolProps);
}

FAKE_API CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool) {
    FAKE_ENTER(fake::kNeedsInit);
    return pool_destroy(pool);
}

FAKE_API CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
    FAKE_ENTER(fake::kNeedsInit);
    return set_attribute(pool, fake::raw(attr), value);
}

FAKE_API CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
    FAKE_ENTER(fake::kNeedsInit);
    return get_attribute(pool, fake::raw(attr), value);
}

FAKE_API CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    sweep(st);
    if (!live_pool(pool)) return CUDA_ERROR_INVALID_VALUE;
    if (releases_memory(pool)) release_free_chunks(st, pool, minBytesToKeep);
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc* map, size_t count) {
    FAKE_ENTER(fake::kNeedsInit);
    return set_access(pool, map, count);
}

FAKE_API CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags* flags, CUmemoryPool memPool, CUmemLocation* location) {
    FAKE_ENTER(fake::kNeedsInit);
    return get_access(flags, memPool, location);
}

FAKE_API CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
    FAKE_ENTER(fake::kDeviceLevel);
    State& st = fake::state();
    if (!pool_out) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::valid_device(st, dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (CUresult rc = check_pools_supported(st, dev)) return rc;
    *pool_out = default_pool({CU_MEM_LOCATION_TYPE_DEVICE, dev});
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
    FAKE_ENTER(fake::kDeviceLevel);
    State& st = fake::state();
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::valid_device(st, dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (CUresult rc = check_pools_supported(st, dev)) return rc;
    *pool = current_pool({CU_MEM_LOCATION_TYPE_DEVICE, dev});
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
    FAKE_ENTER(fake::kDeviceLevel);
    State& st = fake::state();
    if (!fake::valid_device(st, dev)) return CUDA_ERROR_INVALID_DEVICE;
    // "The memory pool must be local to the specified device"; imported pools cannot be current.
    if (!live_pool(pool) || pool->imported || pool->location_type != CU_MEM_LOCATION_TYPE_DEVICE || pool->device != dev)
        return CUDA_ERROR_INVALID_VALUE;
    pools().current[{CU_MEM_LOCATION_TYPE_DEVICE, dev}] = pool;
    return CUDA_SUCCESS;
}

#endif  // FAKE_HAS(11020)

#if FAKE_HAS(13000)

FAKE_API CUresult CUDAAPI cuMemGetDefaultMemPool(CUmemoryPool* pool_out, CUmemLocation* location,
                                                 CUmemAllocationType type) {
    FAKE_ENTER(fake::kDeviceLevel);
    State& st = fake::state();
    if (!pool_out) return CUDA_ERROR_INVALID_VALUE;
    Key key;
    if (CUresult rc = typed_key(st, location, fake::raw(type), &key)) return rc;
    *pool_out = default_pool(key);
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuMemGetMemPool(CUmemoryPool* pool, CUmemLocation* location, CUmemAllocationType type) {
    FAKE_ENTER(fake::kDeviceLevel);
    State& st = fake::state();
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    Key key;
    if (CUresult rc = typed_key(st, location, fake::raw(type), &key)) return rc;
    *pool = current_pool(key);
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuMemSetMemPool(CUmemLocation* location, CUmemAllocationType type, CUmemoryPool pool) {
    FAKE_ENTER(fake::kDeviceLevel);
    State& st = fake::state();
    Key key;
    if (CUresult rc = typed_key(st, location, fake::raw(type), &key)) return rc;
    // The pool's own location and type, and a pool that can allocate.
    if (!live_pool(pool) || pool->imported || key_of(pool) != key) return CUDA_ERROR_INVALID_VALUE;
    pools().current[key] = pool;
    return CUDA_SUCCESS;
}

#endif  // FAKE_HAS(13000)
