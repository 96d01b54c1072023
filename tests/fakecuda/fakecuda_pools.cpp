// fakecuda_pools.cpp — stream-ordered allocation and memory pools (CUDA 11.2's
// cuMemAllocAsync / cuMemFreeAsync / cuMemPool* family, CUDA 13's
// location-keyed pool queries), emulated on host memory.
//
// A pool reserves chunks (2 MiB granular host mappings standing in for device
// memory; a memfd at file offsets for IPC-capable pools) and hands out blocks
// carved from them. Each live block is a Kind::Pool entry of State::allocs,
// so copies, sets, cuMemGetAddressRange and pointer queries see it. The model
// follows the driver API reference and the programming guide's chapter on the
// stream-ordered allocator:
//
//   * cuMemAllocAsync returns the address at once and puts a marker on the
//     stream; cuMemFreeAsync takes the block out of State::allocs at once (a
//     later call naming the address answers INVALID_VALUE) and puts the free
//     on the stream: work enqueued before it may still use the bytes until
//     the free has run there; work that runs after it and touches the block
//     fails its context with ILLEGAL_ADDRESS (fakecuda_transfers.cpp names
//     memory by block, see block_bytes).
//   * A freed block goes back to the pool tagged with its free's position.
//     The same stream reuses it at once (same address); another stream once
//     the free has run (REUSE_ALLOW_OPPORTUNISTIC), once the stream waited
//     for an event recorded after it (REUSE_FOLLOW_EVENT_DEPENDENCIES), or,
//     when the pool cannot grow, by waiting for it
//     (REUSE_ALLOW_INTERNAL_DEPENDENCIES); a synchronization that covered the
//     free makes it reusable by every stream whatever the attributes say.
//   * cuMemFree of a pool block frees it at once without waiting ("this API
//     will not perform any implicit synchronization" for these pointers).
//   * At stream / event / context synchronization a pool holding more than
//     its RELEASE_THRESHOLD unmaps wholly free chunks; cuMemPoolTrimTo does
//     the same down to its argument. IPC-capable and imported pools never
//     give memory back (the guide: trim is a no-op, the threshold ignored).
//   * cuMemPoolDestroy with blocks outstanding or frees pending returns at
//     once; the pool goes when the last of them has. Pools and their blocks
//     belong to no context (cuCtxDestroy leaves them alone).
//   * IPC (Linux): an exportable pool's chunks live in one memfd whose first
//     MiB is a shared header (a slot per exported block: block id, offset,
//     size, importer count). The POSIX-fd handle is a dup of that memfd; the
//     importer maps the exported block's pages from it, so the two processes
//     share bytes. A block the exporter frees while another process still has
//     it imported stays out of the free list until the importer freed it.
#include "fake_state.hpp"
#include "fake_enum.hpp"

#if defined(__linux__)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

namespace {

using fake::Allocation;
using fake::Dependency;
using fake::Kind;
using fake::Queue;
using fake::State;

constexpr std::size_t kChunk = std::size_t{2} << 20;        // reservation granularity
constexpr std::size_t kBlockAlignment = fake::kDeviceAlignment;
constexpr std::size_t kHeaderBytes = std::size_t{1} << 20;  // an IPC pool's shared header, at file offset 0

// Where a stream-ordered free sits in its stream; no serial: available to all.
struct FreeTag {
    std::weak_ptr<Queue> queue;
    std::uint64_t serial = 0;
    std::uint64_t seq = 0;
    bool pending() const { return serial != 0; }
};

// The free has run (or its stream is gone with everything it held).
bool tag_done(const FreeTag& tag) {
    if (!tag.pending()) return true;
    const std::shared_ptr<Queue> queue = tag.queue.lock();
    return !queue || queue->completed >= tag.seq;
}

struct Segment {
    std::size_t size = 0;
    std::uintptr_t chunk = 0;      // base of the chunk it lies in
    unsigned long long block = 0;  // the live block it is; 0: free
    FreeTag tag;                   // free: the stream-ordered free that released it
    int quarantine = -1;           // free, but another process still has it imported (shared slot)
};

struct Chunk {
    std::size_t size = 0;
    void* mapping = nullptr;
    std::uint64_t file_offset = 0;  // IPC pools: where it lies in the memfd
};

#if defined(__linux__)
// One exported block, in the shared header of an IPC pool.
struct SharedSlot {
    std::atomic<std::uint64_t> block;     // 0: slot unused
    std::atomic<std::int32_t> importers;  // live imports in other processes
    std::atomic<std::int32_t> state;      // kSlotLive, or kSlotFreed once the exporter freed it
    std::uint64_t offset;                 // in the memfd
    std::uint64_t size;
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::int32_t>::is_always_lock_free,
              "the slots are shared between processes");
[[maybe_unused]] constexpr std::int32_t kSlotLive = 1;
constexpr std::int32_t kSlotFreed = 2;

struct SharedPoolHeader {
    char magic[8];
    std::int32_t creator_pid;
    std::int32_t location_type;
    std::int32_t location_id;
    std::uint32_t handle_types;
    std::uint32_t slot_count;
    std::uint32_t unused;
};
constexpr std::size_t kSlotsAt = 64;
static_assert(sizeof(SharedPoolHeader) <= kSlotsAt, "the slots follow the header");
[[maybe_unused]] constexpr char kPoolMagic[8] = {'F', 'A', 'K', 'E', 'P', 'O', 'O', 'L'};
[[maybe_unused]] constexpr char kPointerMagic[8] = {'F', 'A', 'K', 'E', 'P', 'P', 'T', '1'};
[[maybe_unused]] constexpr char kFabricMagic[8] = {'F', 'A', 'K', 'E', 'P', 'F', 'B', '1'};

SharedSlot* slots_of(SharedPoolHeader* header) {
    return reinterpret_cast<SharedSlot*>(reinterpret_cast<char*>(header) + kSlotsAt);
}

// What CUmemPoolPtrExportData holds.
struct PointerBlob {
    char magic[8];
    std::uint64_t inode;      // the pool's memfd
    std::uint64_t device_id;
    std::uint64_t offset;     // the block in it
    std::uint64_t size;
    std::uint64_t block;
    std::int32_t slot;
    std::int32_t pid;
    unsigned char unused[8];
};
static_assert(sizeof(PointerBlob) == sizeof(CUmemPoolPtrExportData), "the blob fills CUmemPoolPtrExportData");

// What a CU_MEM_HANDLE_TYPE_FABRIC pool handle holds: the exporter's memfd by pid + fd.
struct FabricBlob {
    char magic[8];
    std::int32_t pid;
    std::int32_t fd;
    std::uint64_t inode;
    std::uint64_t device_id;
    unsigned char unused[32];
};
static_assert(sizeof(FabricBlob) == sizeof(CUmemFabricHandle), "the blob fills CUmemFabricHandle");
#else
struct SharedPoolHeader;
#endif

}  // namespace

// The opaque CUmemoryPool of cuda.h.
struct CUmemPoolHandle_st {
    int location_type = CU_MEM_LOCATION_TYPE_DEVICE;
    int location_id = 0;
    int device = 0;  // resident device; -1 for host pools
    unsigned handle_types = 0;
    std::size_t max_size = 0;  // 0: no limit but the device's memory
    bool is_default = false;
    bool imported = false;
    bool destroyed = false;  // cuMemPoolDestroy returned; resources wait for outstanding blocks
    int follow_events = 1;
    int opportunistic = 1;
    int internal_dependencies = 1;
    std::uint64_t release_threshold = 0;
    std::uint64_t reserved = 0, reserved_high = 0, used = 0, used_high = 0;
    std::map<std::pair<int, int>, unsigned long long> access;  // granted to other locations
    std::map<std::uintptr_t, Chunk> chunks;
    std::map<std::uintptr_t, Segment> segments;  // every piece of every chunk, by address
    long blocks = 0;       // handed out (or imported) and not freed at the API
    long pending = 0;      // stream-ordered frees of its blocks not yet run
    long quarantined = 0;  // free pieces another process still has imported
    // IPC
    int fd = -1;
    SharedPoolHeader* header = nullptr;
    std::uint64_t next_offset = kHeaderBytes;
    std::uint64_t inode = 0, device_id = 0;
    std::map<std::uintptr_t, int> slots;  // exported block base -> slot
};

namespace {

using Pool = CUmemPoolHandle_st;
using Key = std::pair<int, int>;  // (location type, id)

// A block whose cuMemFreeAsync has not run yet in its stream.
struct Retiring {
    Pool* pool = nullptr;           // null: cuMemAlloc memory (detached)
    std::uintptr_t base = 0;
    std::size_t size = 0;
    Dependency free_at;
    bool imported = false;          // another process's block: unmapped when the free has run
    void* mapping = nullptr;
    std::size_t mapping_size = 0;
    Allocation detached;            // cuMemAlloc memory, released when the free has run
};

struct Pools {
    std::set<Pool*> all;                  // every pool object (defaults and destroyed-but-pending included)
    std::map<Key, Pool*> defaults;
    std::map<Key, Pool*> current;         // absent: the default
    std::map<unsigned long long, Retiring> retiring;
    std::map<unsigned long long, int> import_slots;  // imported block id -> its slot in the exporter's header
    std::map<std::uintptr_t, std::size_t> chunk_ranges;  // every own chunk, for pool_address
};

// Guarded by State::mu like everything else; never destroyed, like the State.
Pools& pools() {
    static Pools* p = new Pools();
    return *p;
}

std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

[[maybe_unused]] bool live_pool(const Pool* pool) { return pool != nullptr && pools().all.count(const_cast<Pool*>(pool)) != 0 && !pool->destroyed; }

// IPC-capable and imported pools keep their physical memory (the guide).
bool releases_memory(const Pool* pool) { return !pool->imported && pool->handle_types == 0; }

void note_usage(Pool* pool) {
    pool->reserved_high = std::max(pool->reserved_high, pool->reserved);
    pool->used_high = std::max(pool->used_high, pool->used);
}

[[maybe_unused]] Key key_of(const Pool* pool) {
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

[[maybe_unused]] Pool* current_pool(const Key& key) {
    auto it = pools().current.find(key);
    return it != pools().current.end() ? it->second : default_pool(key);
}

// ---- chunks -------------------------------------------------------------------------------------

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

// Reserves a chunk holding at least `need` bytes; its one free segment, or end().
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

// ---- IPC slots ----------------------------------------------------------------------------------

#if defined(__linux__)
SharedSlot* slot_at(Pool* pool, int slot) {
    if (pool->header == nullptr || slot < 0 || static_cast<std::uint32_t>(slot) >= pool->header->slot_count) return nullptr;
    return &slots_of(pool->header)[slot];
}

void clear_slot(Pool* pool, int slot) {
    if (SharedSlot* s = slot_at(pool, slot)) {
        s->state.store(0);
        s->block.store(0);
    }
}
#endif

// The exporter freed a block: its slot says so; a block another process still
// has imported stays quarantined until that process frees it.
void retire_slot(Pool* pool, std::uintptr_t base, Segment& seg) {
    auto it = pool->slots.find(base);
    if (it == pool->slots.end()) return;
    const int slot = it->second;
    pool->slots.erase(it);
#if defined(__linux__)
    if (SharedSlot* s = slot_at(pool, slot)) {
        s->state.store(kSlotFreed);
        if (s->importers.load() > 0) {
            std::fprintf(stderr,
                         "fakecuda: a pool allocation was freed while another process still has it imported; "
                         "its bytes stay reserved until that process frees it\n");
            seg.quarantine = slot;
            ++pool->quarantined;
            return;
        }
    }
    clear_slot(pool, slot);
#else
    (void)seg;
    (void)slot;
#endif
}

// ---- pool lifetime ------------------------------------------------------------------------------

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

void maybe_destroy(State& st, Pool* pool) {
    if (pool->destroyed && pool->blocks == 0 && pool->pending == 0) final_release(st, pool);
}

void unmap_imported(void* mapping, std::size_t size) {
#if defined(__linux__)
    ::munmap(mapping, size);
#else
    (void)mapping;
    (void)size;
#endif
}

void release_import(Pool* pool, unsigned long long block) {
    auto it = pools().import_slots.find(block);
    if (it == pools().import_slots.end()) return;
#if defined(__linux__)
    if (SharedSlot* s = slot_at(pool, it->second)) s->importers.fetch_sub(1);
#else
    (void)pool;
#endif
    pools().import_slots.erase(it);
}

// A stream-ordered free has run: what it released goes.
void complete(State& st, std::map<unsigned long long, Retiring>::iterator it) {
    Retiring& r = it->second;
    Pool* pool = r.pool;
    if (pool == nullptr) {
        fake::release_allocation(st, r.detached);
    } else if (r.imported) {
        unmap_imported(r.mapping, r.mapping_size);
        release_import(pool, it->first);
    }
    pools().retiring.erase(it);
    if (pool != nullptr) {
        --pool->pending;
        maybe_destroy(st, pool);
    }
}

// Frees that ran, quarantined blocks their importers released, pools whose
// destruction waited for them.
void sweep(State& st) {
    auto& retiring = pools().retiring;
    for (auto it = retiring.begin(); it != retiring.end();) {
        auto next = std::next(it);
        if (fake::finished(it->second.free_at)) complete(st, it);
        it = next;
    }
#if defined(__linux__)
    for (Pool* pool : std::vector<Pool*>(pools().all.begin(), pools().all.end())) {
        if (pool->quarantined == 0) continue;
        bool changed = false;
        for (auto& kv : pool->segments) {
            Segment& seg = kv.second;
            if (seg.quarantine < 0) continue;
            SharedSlot* s = slot_at(pool, seg.quarantine);
            if (s != nullptr && s->importers.load() > 0) continue;
            clear_slot(pool, seg.quarantine);
            seg.quarantine = -1;
            --pool->quarantined;
            changed = true;
        }
        if (changed) coalesce(pool);
    }
#endif
}

// ---- blocks -------------------------------------------------------------------------------------

// Whether a free piece may serve an allocation on `queue` now (without
// waiting for another stream).
bool reusable(const Pool* pool, const Segment& seg, const Queue& queue) {
    if (seg.block != 0 || seg.quarantine >= 0) return false;
    const FreeTag& tag = seg.tag;
    if (!tag.pending() || tag.serial == queue.serial) return true;  // free for all, or freed on this stream
    if (pool->follow_events) {
        auto waited = queue.waited.find(tag.serial);
        if (waited != queue.waited.end() && waited->second >= tag.seq) return true;
    }
    return pool->opportunistic && tag_done(tag);
}

[[maybe_unused]] CUresult allocate_block(State& st, Pool* pool, std::size_t bytes, const std::shared_ptr<Queue>& queue,
                        CUdeviceptr* out) {
    // Nothing larger than a device's memory (the rounding below cannot wrap then).
    if (bytes > fake::kTotalMemory) return CUDA_ERROR_OUT_OF_MEMORY;
    const std::size_t need = round_up(bytes, kBlockAlignment);
    auto& segments = pool->segments;
    auto found = segments.end();
    for (auto it = segments.begin(); it != segments.end() && found == segments.end(); ++it)
        if (it->second.size >= need && reusable(pool, it->second, *queue)) found = it;
    if (found == segments.end()) found = reserve_chunk(st, pool, need);
    std::vector<Dependency> after;
    if (found == segments.end() && pool->internal_dependencies) {
        // The pool cannot grow: take memory another stream's free will
        // release, this stream waiting for that free from here on.
        for (auto it = segments.begin(); it != segments.end(); ++it) {
            const Segment& seg = it->second;
            if (seg.block != 0 || seg.quarantine >= 0 || seg.size < need || !seg.tag.pending()) continue;
            const std::shared_ptr<Queue> other = seg.tag.queue.lock();
            if (other) after.push_back({other, seg.tag.seq});
            found = it;
            break;
        }
    }
    if (found == segments.end()) return CUDA_ERROR_OUT_OF_MEMORY;

    // The allocation in stream order (the emulated device has nothing to do then).
    fake::enqueue(st, queue, [](State&) { return CUDA_SUCCESS; }, std::move(after));

    const std::uintptr_t base = found->first;
    Segment& seg = found->second;
    if (seg.size > need) {
        Segment rest = seg;
        rest.size = seg.size - need;
        segments.emplace(base + need, rest);
        seg.size = need;
    }
    seg.tag = FreeTag{};
    seg.block = st.next_buffer_id++;

    Allocation a;
    a.base = base;
    a.size = bytes;
    a.kind = Kind::Pool;
    a.device = pool->device >= 0 ? pool->device : 0;
    a.ctx = nullptr;  // stream-ordered allocations belong to no context
    a.buffer_id = seg.block;
    a.pool = pool;
    a.allowed_handle_types = pool->handle_types;
    st.allocs.emplace(base, std::move(a));
    pool->used += need;
    ++pool->blocks;
    note_usage(pool);
    *out = static_cast<CUdeviceptr>(base);
    return CUDA_SUCCESS;
}

// A block left State::allocs (cuMemFree, cuMemFreeAsync): back to its pool,
// tagged with the free's position in its stream when there is one.
void free_block(State& st, const Allocation& a, const Dependency* at) {
    Pool* pool = a.pool;
    --pool->blocks;
    if (pool->imported) {
        pool->used -= std::min<std::uint64_t>(pool->used, a.size);
        pool->reserved -= std::min<std::uint64_t>(pool->reserved, a.mapping_size);
        if (at == nullptr) {
            unmap_imported(a.mapping, a.mapping_size);
            release_import(pool, a.buffer_id);
            maybe_destroy(st, pool);
            return;
        }
        Retiring r;
        r.pool = pool;
        r.base = a.base;
        r.size = a.size;
        r.free_at = *at;
        r.imported = true;
        r.mapping = a.mapping;
        r.mapping_size = a.mapping_size;
        pools().retiring.emplace(a.buffer_id, std::move(r));
        ++pool->pending;
        return;
    }
    auto seg = pool->segments.find(a.base);
    if (seg != pool->segments.end()) {
        pool->used -= std::min<std::uint64_t>(pool->used, seg->second.size);
        seg->second.block = 0;
        seg->second.tag = FreeTag{};
        if (at != nullptr) {
            seg->second.tag.queue = at->queue;
            seg->second.tag.serial = at->queue->serial;
            seg->second.tag.seq = at->seq;
        }
        retire_slot(pool, a.base, seg->second);
    }
    if (at != nullptr) {
        Retiring r;
        r.pool = pool;
        r.base = a.base;
        r.size = a.size;
        r.free_at = *at;
        pools().retiring.emplace(a.buffer_id, std::move(r));
        ++pool->pending;
    }
    coalesce(pool);
    maybe_destroy(st, pool);
}

}  // namespace

// ---- hooks of fake_state.hpp (every variant) -------------------------------------------------------

namespace fake {

unsigned long long device_block_id(State& st, std::uintptr_t p) {
    const Allocation* a = find_allocation(st, p, 0);
    return a != nullptr && (a->kind == Kind::Pool || a->kind == Kind::Device) ? a->buffer_id : 0;
}

void* block_bytes(State& st, std::uintptr_t p, std::size_t n, unsigned long long id) {
    if (const Allocation* a = find_allocation(st, p, n); a != nullptr && a->buffer_id == id)
        return reinterpret_cast<void*>(p);
    // Freed by cuMemFreeAsync, the free not yet reached in its stream.
    auto it = pools().retiring.find(id);
    if (it == pools().retiring.end() || finished(it->second.free_at)) return nullptr;
    const Retiring& r = it->second;
    if (p < r.base || p - r.base >= r.size || n > r.size - (p - r.base)) return nullptr;
    return reinterpret_cast<void*>(p);
}

bool pool_address(State&, std::uintptr_t p) {
    const auto& ranges = pools().chunk_ranges;
    auto it = ranges.upper_bound(p);
    if (it == ranges.begin()) return false;
    --it;
    return p - it->first < it->second;
}

bool pool_on_host(const CUmemPoolHandle_st* pool) {
    return pool != nullptr && pool->location_type != CU_MEM_LOCATION_TYPE_DEVICE;
}

void pool_block_mapping(const Allocation& block, std::uintptr_t* base, std::size_t* size) {
    const Pool* pool = block.pool;
    if (block.kind != Kind::Pool || pool == nullptr) return;
    if (pool->imported) {
        *base = reinterpret_cast<std::uintptr_t>(block.mapping);
        *size = block.mapping_size;
        return;
    }
    auto chunk = pool->chunks.upper_bound(block.base);
    if (chunk == pool->chunks.begin()) return;
    --chunk;
    *base = chunk->first;
    *size = chunk->second.size;
}

CUresult pool_free_now(State& st, std::uintptr_t base) {
    sweep(st);
    auto it = st.allocs.find(base);
    if (it == st.allocs.end() || it->second.kind != Kind::Pool) return CUDA_ERROR_INVALID_VALUE;
    const Allocation a = std::move(it->second);
    st.allocs.erase(it);
    free_block(st, a, nullptr);
    return CUDA_SUCCESS;
}

void pools_synchronized(State& st, const std::function<bool(const Queue*, std::uint64_t)>& covered) {
    sweep(st);
    for (Pool* pool : std::vector<Pool*>(pools().all.begin(), pools().all.end())) {
        // Frees the synchronization saw done are free for every stream now.
        for (auto& kv : pool->segments) {
            FreeTag& tag = kv.second.tag;
            if (!tag.pending() || !tag_done(tag)) continue;
            const std::shared_ptr<Queue> queue = tag.queue.lock();
            if (!queue || covered(queue.get(), tag.seq)) tag = FreeTag{};
        }
        coalesce(pool);
        if (releases_memory(pool) && pool->reserved > pool->release_threshold)
            release_free_chunks(st, pool, pool->release_threshold);
    }
}

void pools_context_destroyed(State& st) { sweep(st); }

}  // namespace fake

// ---- entry points -----------------------------------------------------------------------------------

#if FAKE_HAS(11020)

namespace {

// Who decides whether host pools work: the first device, as for host VMM.
constexpr int kHostJudge = 0;

CUresult check_pools_supported(const State& st, int device) {
    return fake::attribute(st, device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) != 0 ? CUDA_SUCCESS
                                                                                       : CUDA_ERROR_NOT_SUPPORTED;
}

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

#if defined(__linux__)
// An IPC pool's memfd and shared header.
CUresult make_shareable(Pool* pool) {
    const int fd = ::memfd_create("fakecuda-pool", MFD_CLOEXEC);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    struct stat info {};
    void* page = MAP_FAILED;
    if (::ftruncate(fd, static_cast<off_t>(kHeaderBytes)) == 0 && ::fstat(fd, &info) == 0)
        page = ::mmap(nullptr, kHeaderBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) {
        ::close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    auto* header = new (page) SharedPoolHeader{};
    std::memcpy(header->magic, kPoolMagic, sizeof header->magic);
    header->creator_pid = static_cast<std::int32_t>(::getpid());
    header->location_type = pool->location_type;
    header->location_id = pool->location_id;
    header->handle_types = pool->handle_types;
    header->slot_count = static_cast<std::uint32_t>((kHeaderBytes - kSlotsAt) / sizeof(SharedSlot));
    pool->fd = fd;
    pool->header = header;
    pool->inode = static_cast<std::uint64_t>(info.st_ino);
    pool->device_id = static_cast<std::uint64_t>(info.st_dev);
    return CUDA_SUCCESS;
}

// A pool imported from the memfd `fd` (not taken: duplicated).
CUresult import_pool(State& st, int fd, unsigned type, Pool** out) {
    struct stat info {};
    if (fd < 0 || ::fstat(fd, &info) != 0 || static_cast<std::uint64_t>(info.st_size) < kHeaderBytes)
        return CUDA_ERROR_INVALID_VALUE;
    void* page = ::mmap(nullptr, kHeaderBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) return CUDA_ERROR_INVALID_VALUE;
    auto* header = static_cast<SharedPoolHeader*>(page);
    const auto fail = [page](CUresult rc) {
        ::munmap(page, kHeaderBytes);
        return rc;
    };
    if (std::memcmp(header->magic, kPoolMagic, sizeof header->magic) != 0) return fail(CUDA_ERROR_INVALID_VALUE);
    if ((header->handle_types & type) == 0) return fail(CUDA_ERROR_INVALID_VALUE);
    if (header->location_type == CU_MEM_LOCATION_TYPE_DEVICE && !fake::valid_device(st, header->location_id))
        return fail(CUDA_ERROR_INVALID_DEVICE);
    const int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) return fail(CUDA_ERROR_OUT_OF_MEMORY);
    auto* pool = new Pool();
    pool->location_type = header->location_type;
    pool->location_id = header->location_id;
    pool->device = header->location_type == CU_MEM_LOCATION_TYPE_DEVICE ? header->location_id : -1;
    pool->handle_types = header->handle_types;
    pool->imported = true;
    pool->fd = own;
    pool->header = header;
    pool->inode = static_cast<std::uint64_t>(info.st_ino);
    pool->device_id = static_cast<std::uint64_t>(info.st_dev);
    pools().all.insert(pool);
    *out = pool;
    return CUDA_SUCCESS;
}

CUresult export_pool(Pool* pool, void* handle_out, unsigned type) {
    if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        const int fd = ::fcntl(pool->fd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
        std::memcpy(handle_out, &fd, sizeof fd);
        return CUDA_SUCCESS;
    }
    FabricBlob blob{};
    std::memcpy(blob.magic, kFabricMagic, sizeof blob.magic);
    blob.pid = static_cast<std::int32_t>(::getpid());
    blob.fd = pool->fd;
    blob.inode = pool->inode;
    blob.device_id = pool->device_id;
    std::memcpy(handle_out, &blob, sizeof blob);
    return CUDA_SUCCESS;
}

CUresult import_fabric(State& st, const void* handle, Pool** out) {
    if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
    FabricBlob blob{};
    std::memcpy(&blob, handle, sizeof blob);
    if (std::memcmp(blob.magic, kFabricMagic, sizeof blob.magic) != 0) return CUDA_ERROR_INVALID_VALUE;
    // The exporter's memfd through /proc (same user), if it is still that file.
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/fd/%d", static_cast<int>(blob.pid), static_cast<int>(blob.fd));
    const int fd = ::open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return CUDA_ERROR_INVALID_VALUE;
    struct stat info {};
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (::fstat(fd, &info) == 0 && static_cast<std::uint64_t>(info.st_ino) == blob.inode &&
        static_cast<std::uint64_t>(info.st_dev) == blob.device_id)
        rc = import_pool(st, fd, CU_MEM_HANDLE_TYPE_FABRIC, out);
    ::close(fd);
    return rc;
}

CUresult export_pointer(Pool* pool, const Allocation& a, CUmemPoolPtrExportData* out) {
    auto chunk = pool->chunks.upper_bound(a.base);
    if (chunk == pool->chunks.begin()) return CUDA_ERROR_INVALID_VALUE;
    --chunk;
    int slot = -1;
    if (auto known = pool->slots.find(a.base); known != pool->slots.end()) {
        slot = known->second;
    } else {
        SharedSlot* slots = slots_of(pool->header);
        for (std::uint32_t i = 0; i < pool->header->slot_count && slot < 0; ++i)
            if (slots[i].block.load() == 0 && slots[i].importers.load() == 0) slot = static_cast<int>(i);
        if (slot < 0) return CUDA_ERROR_OUT_OF_MEMORY;
        SharedSlot& s = slots[slot];
        s.offset = chunk->second.file_offset + (a.base - chunk->first);
        s.size = a.size;
        s.state.store(kSlotLive);
        s.block.store(a.buffer_id);
        pool->slots.emplace(a.base, slot);
    }
    PointerBlob blob{};
    std::memcpy(blob.magic, kPointerMagic, sizeof blob.magic);
    blob.inode = pool->inode;
    blob.device_id = pool->device_id;
    blob.offset = chunk->second.file_offset + (a.base - chunk->first);
    blob.size = a.size;
    blob.block = a.buffer_id;
    blob.slot = slot;
    blob.pid = static_cast<std::int32_t>(::getpid());
    std::memcpy(out, &blob, sizeof blob);
    return CUDA_SUCCESS;
}

CUresult import_pointer(State& st, Pool* pool, const CUmemPoolPtrExportData& data, CUdeviceptr* out) {
    PointerBlob blob{};
    std::memcpy(&blob, &data, sizeof blob);
    if (std::memcmp(blob.magic, kPointerMagic, sizeof blob.magic) != 0) return CUDA_ERROR_INVALID_VALUE;
    if (blob.inode != pool->inode || blob.device_id != pool->device_id || blob.size == 0) return CUDA_ERROR_INVALID_VALUE;
    SharedSlot* s = slot_at(pool, blob.slot);
    if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
    // Claim first, then check: an exporter that frees meanwhile sees the claim.
    s->importers.fetch_add(1);
    if (s->block.load() != blob.block || s->state.load() != kSlotLive || s->offset != blob.offset) {
        s->importers.fetch_sub(1);
        return CUDA_ERROR_INVALID_VALUE;  // freed by its exporter, or not this pool's
    }
    const std::uint64_t first = blob.offset / fake::kPageSize * fake::kPageSize;
    const std::size_t length = round_up(static_cast<std::size_t>(blob.offset + blob.size - first), fake::kPageSize);
    void* m = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, pool->fd, static_cast<off_t>(first));
    if (m == MAP_FAILED) {
        s->importers.fetch_sub(1);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    Allocation a;
    a.base = reinterpret_cast<std::uintptr_t>(m) + static_cast<std::uintptr_t>(blob.offset - first);
    a.size = static_cast<std::size_t>(blob.size);
    a.kind = Kind::Pool;
    a.device = pool->device >= 0 ? pool->device : 0;
    a.mapping = m;
    a.mapping_size = length;
    a.buffer_id = st.next_buffer_id++;
    a.pool = pool;
    a.allowed_handle_types = pool->handle_types;
    pools().import_slots.emplace(a.buffer_id, blob.slot);
    pool->used += a.size;
    pool->reserved += length;
    ++pool->blocks;
    note_usage(pool);
    *out = static_cast<CUdeviceptr>(a.base);
    st.allocs.emplace(a.base, std::move(a));
    return CUDA_SUCCESS;
}
#endif  // __linux__

// ---- entries' bodies ----------------------------------------------------------------------------

CUresult alloc_async(CUdeviceptr* out, std::size_t bytes, Pool* pool, bool from_pool, CUstream stream,
                     bool per_thread) {
    State& st = fake::state();
    sweep(st);
    if (!out || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Queue> queue;
    if (CUresult rc = fake::stream_queue(st, stream, per_thread, &queue)) return rc;
    if (from_pool) {
        // Imported pools cannot allocate (the guide's import-pool limitations).
        if (!live_pool(pool) || pool->imported) return CUDA_ERROR_INVALID_VALUE;
        if (pool->device >= 0) {
            if (CUresult rc = check_pools_supported(st, pool->device)) return rc;
        }
    } else {
        // The current pool of the stream's device, whatever the current context.
        const int device = queue->ctx->device;
        if (CUresult rc = check_pools_supported(st, device)) return rc;
        pool = current_pool({CU_MEM_LOCATION_TYPE_DEVICE, device});
    }
    return allocate_block(st, pool, bytes, queue, out);
}

CUresult free_async(CUdeviceptr dptr, CUstream stream, bool per_thread) {
    State& st = fake::state();
    sweep(st);
    std::shared_ptr<Queue> queue;
    if (CUresult rc = fake::stream_queue(st, stream, per_thread, &queue)) return rc;
    if (dptr == 0) return CUDA_SUCCESS;
    auto it = st.allocs.find(static_cast<std::uintptr_t>(dptr));
    if (it == st.allocs.end() || (it->second.kind != Kind::Pool && it->second.kind != Kind::Device))
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned long long id = it->second.buffer_id;
    // The free in stream order: what it releases goes when it has run.
    const Dependency at = fake::enqueue(st, queue, [id](State& s) {
        auto retiring = pools().retiring.find(id);
        if (retiring != pools().retiring.end()) complete(s, retiring);
        return CUDA_SUCCESS;
    });
    Allocation a = std::move(it->second);
    st.allocs.erase(it);
    if (a.kind == Kind::Pool) {
        free_block(st, a, &at);
    } else {
        // cuMemAlloc memory freed in stream order (the guide allows it).
        Retiring r;
        r.base = a.base;
        r.size = a.size;
        r.free_at = at;
        r.detached = std::move(a);
        pools().retiring.emplace(id, std::move(r));
    }
    return CUDA_SUCCESS;
}

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
#if defined(__linux__)
        if (CUresult rc = make_shareable(pool)) {
            delete pool;
            return rc;
        }
#else
        delete pool;
        return CUDA_ERROR_NOT_SUPPORTED;
#endif
    }
    pools().all.insert(pool);
    *out = pool;
    return CUDA_SUCCESS;
}

CUresult pool_destroy(CUmemoryPool pool) {
    State& st = fake::state();
    sweep(st);
    if (!live_pool(pool) || pool->is_default) return CUDA_ERROR_INVALID_VALUE;
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

FAKE_API CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return alloc_async(dptr, bytesize, nullptr, false, hStream, false);
}

FAKE_API CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return alloc_async(dptr, bytesize, nullptr, false, hStream, true);
}

FAKE_API CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                                  CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return alloc_async(dptr, bytesize, pool, true, hStream, false);
}

FAKE_API CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                                       CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return alloc_async(dptr, bytesize, pool, true, hStream, true);
}

FAKE_API CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return free_async(dptr, hStream, false);
}

FAKE_API CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return free_async(dptr, hStream, true);
}

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

FAKE_API CUresult CUDAAPI cuMemPoolExportToShareableHandle(void* handle_out, CUmemoryPool pool,
                                                           CUmemAllocationHandleType handleType,
                                                           unsigned long long flags) {
    FAKE_ENTER(fake::kNeedsInit);
    const auto type = static_cast<unsigned>(fake::raw(handleType));
    if (!handle_out || flags != 0 || !live_pool(pool) || pool->imported) return CUDA_ERROR_INVALID_VALUE;
    // Only a handle type the pool was created with.
    if (type == 0 || (type & (type - 1)) != 0 || (pool->handle_types & type) == 0) return CUDA_ERROR_INVALID_VALUE;
#if defined(__linux__)
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR && type != CU_MEM_HANDLE_TYPE_FABRIC)
        return CUDA_ERROR_NOT_SUPPORTED;
    // A fabric pool is created without an IMEX channel (as on the H200); its
    // export is where the channel is needed.
    if (type == CU_MEM_HANDLE_TYPE_FABRIC && !fake::state().imex_channel) return CUDA_ERROR_NOT_PERMITTED;
    return export_pool(pool, handle_out, type);
#else
    return CUDA_ERROR_NOT_SUPPORTED;
#endif
}

FAKE_API CUresult CUDAAPI cuMemPoolImportFromShareableHandle(CUmemoryPool* pool_out, void* handle,
                                                             CUmemAllocationHandleType handleType,
                                                             unsigned long long flags) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    const auto type = static_cast<unsigned>(fake::raw(handleType));
    if (!pool_out || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR && type != CU_MEM_HANDLE_TYPE_FABRIC &&
        type != CU_MEM_HANDLE_TYPE_WIN32 && type != CU_MEM_HANDLE_TYPE_WIN32_KMT)
        return CUDA_ERROR_INVALID_VALUE;
    // The importing side's device must support the handle type too.
    bool supported = false;
    for (int d = 0; d < st.device_count && !supported; ++d)
        supported = (static_cast<unsigned>(fake::attribute(st, d, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES)) & type) != 0;
    if (!supported) return CUDA_ERROR_NOT_SUPPORTED;
#if defined(__linux__)
    Pool* pool = nullptr;
    CUresult rc = CUDA_ERROR_NOT_SUPPORTED;
    if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        rc = import_pool(st, static_cast<int>(reinterpret_cast<std::intptr_t>(handle)), type, &pool);
    else if (type == CU_MEM_HANDLE_TYPE_FABRIC)
        rc = import_fabric(st, handle, &pool);
    if (rc == CUDA_SUCCESS) *pool_out = pool;
    return rc;
#else
    (void)handle;
    return CUDA_ERROR_NOT_SUPPORTED;
#endif
}

FAKE_API CUresult CUDAAPI cuMemPoolExportPointer(CUmemPoolPtrExportData* shareData_out, CUdeviceptr ptr) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    sweep(st);
    if (!shareData_out) return CUDA_ERROR_INVALID_VALUE;
    // A live block of an exportable pool, named by its start.
    auto it = st.allocs.find(static_cast<std::uintptr_t>(ptr));
    if (it == st.allocs.end() || it->second.kind != Kind::Pool) return CUDA_ERROR_INVALID_VALUE;
    Pool* pool = it->second.pool;
    if (pool->imported || pool->handle_types == 0) return CUDA_ERROR_INVALID_VALUE;
#if defined(__linux__)
    return export_pointer(pool, it->second, shareData_out);
#else
    return CUDA_ERROR_NOT_SUPPORTED;
#endif
}

FAKE_API CUresult CUDAAPI cuMemPoolImportPointer(CUdeviceptr* ptr_out, CUmemoryPool pool,
                                                 CUmemPoolPtrExportData* shareData) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    sweep(st);
    if (!ptr_out || !shareData) return CUDA_ERROR_INVALID_VALUE;
    // Pointers are imported into an imported pool (the exporter's own pool has the block already).
    if (!live_pool(pool) || !pool->imported) return CUDA_ERROR_INVALID_VALUE;
#if defined(__linux__)
    return import_pointer(st, pool, *shareData, ptr_out);
#else
    return CUDA_ERROR_NOT_SUPPORTED;
#endif
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

// ---- introspection (fakecuda_probe.h; every variant) -------------------------------------------------

namespace {
struct Locked {
    State& st = fake::state();
    std::lock_guard<std::mutex> lock{st.mu};
};
}  // namespace

FAKE_API long fakecuda_live_pools(void) {
    Locked l;
    long n = 0;
    for (const Pool* pool : pools().all) n += (!pool->is_default && !pool->destroyed) ? 1 : 0;
    return n;
}

FAKE_API long fakecuda_pending_pool_destroys(void) {
    Locked l;
    long n = 0;
    for (const Pool* pool : pools().all) n += pool->destroyed ? 1 : 0;
    return n;
}

FAKE_API long fakecuda_live_pool_blocks(void) {
    Locked l;
    long n = 0;
    for (const auto& kv : l.st.allocs) n += kv.second.kind == Kind::Pool ? 1 : 0;
    return n;
}

FAKE_API unsigned long long fakecuda_pool_reserved_bytes(void* pool) {
    Locked l;
    unsigned long long n = 0;
    for (const Pool* p : pools().all)
        if (pool == nullptr || pool == p) n += p->reserved;
    return n;
}

FAKE_API int fakecuda_pool_free_ranges(void* pool, unsigned long long* addresses, unsigned long long* sizes,
                                       int capacity) {
    Locked l;
    auto* p = static_cast<Pool*>(pool);
    if (pools().all.count(p) == 0) return -1;
    int n = 0;
    for (const auto& kv : p->segments) {
        if (kv.second.block != 0) continue;
        if (n < capacity) {
            if (addresses) addresses[n] = kv.first;
            if (sizes) sizes[n] = kv.second.size;
        }
        ++n;
    }
    return n;
}
