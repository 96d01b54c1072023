// fake_pools.hpp — the memory-pool model shared by the pool sources:
// fakecuda_pools.cpp (pool objects, chunks, attributes, access),
// fakecuda_pool_alloc.cpp (stream-ordered allocation and free),
// fakecuda_pool_sharing.cpp (pool IPC) and the pool probes of
// fakecuda_introspection.cpp. Everything here runs with State::mu held.
#ifndef CUDYN_TESTS_FAKECUDA_FAKE_POOLS_HPP
#define CUDYN_TESTS_FAKECUDA_FAKE_POOLS_HPP

#include "fake_state.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <utility>

namespace fake::mempool {

constexpr std::size_t kHeaderBytes = std::size_t{1} << 20;  // an IPC pool's shared header, at file offset 0

// Where a stream-ordered free sits in its stream; no serial: available to all.
struct FreeTag {
    std::weak_ptr<Queue> queue;
    std::uint64_t serial = 0;
    std::uint64_t seq = 0;
    bool pending() const { return serial != 0; }
};

// The free has run (or its stream is gone with everything it held).
bool tag_done(const FreeTag& tag);

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

struct SharedPoolHeader;  // fakecuda_pool_sharing.cpp (Linux)

}  // namespace fake::mempool

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
    bool exported = false;   // cuMemPoolExportToShareableHandle succeeded once: its pointers may export
    // Its fabric export was refused (no IMEX channel): the real driver then
    // crashed in cuMemPoolDestroy, so the fake aborts there (pool_destroy).
    bool fabric_export_refused = false;
    int follow_events = 1;
    int opportunistic = 1;
    int internal_dependencies = 1;
    std::uint64_t release_threshold = 0;
    std::uint64_t reserved = 0, reserved_high = 0, used = 0, used_high = 0;
    std::map<std::pair<int, int>, unsigned long long> access;  // granted to other locations
    std::map<std::uintptr_t, fake::mempool::Chunk> chunks;
    std::map<std::uintptr_t, fake::mempool::Segment> segments;  // every piece of every chunk, by address
    long blocks = 0;       // handed out (or imported) and not freed at the API
    long pending = 0;      // stream-ordered frees of its blocks not yet run
    long quarantined = 0;  // free pieces another process still has imported
    // IPC
    int fd = -1;
    fake::mempool::SharedPoolHeader* header = nullptr;
    std::uint64_t next_offset = fake::mempool::kHeaderBytes;
    std::uint64_t inode = 0, device_id = 0;
    std::map<std::uintptr_t, int> slots;  // exported block base -> slot
};

namespace fake::mempool {

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

// ---- pool objects and chunks (fakecuda_pools.cpp) ------------------------------------------------
// Never destroyed, like the State.
Pools& pools();
inline std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }
// A pool object that cuMemPoolDestroy has not taken yet.
bool live_pool(const Pool* pool);
// IPC-capable and imported pools keep their physical memory (the guide).
bool releases_memory(const Pool* pool);
void note_usage(Pool* pool);
Key key_of(const Pool* pool);
Pool* default_pool(const Key& key);
Pool* current_pool(const Key& key);
CUresult check_pools_supported(const State& st, int device);
// Reserves a chunk holding at least `need` bytes; its one free segment, or end().
std::map<std::uintptr_t, Segment>::iterator reserve_chunk(State& st, Pool* pool, std::size_t need);
// Merges adjacent free pieces that may be handed out under the same rule.
void coalesce(Pool* pool);
// Unmaps wholly free chunks while the pool keeps at least `keep` bytes reserved.
void release_free_chunks(State& st, Pool* pool, std::uint64_t keep);
// A destroyed pool goes once its last block and pending free have.
void maybe_destroy(State& st, Pool* pool);

// ---- stream-ordered allocation (fakecuda_pool_alloc.cpp) -------------------------------------------
// Completes the frees that ran, releases quarantined blocks, destroys pools
// that waited for them.
void sweep(State& st);

// ---- pool sharing (fakecuda_pool_sharing.cpp) ---------------------------------------------------
// An IPC pool's memfd and shared header (NOT_SUPPORTED but on Linux).
CUresult make_shareable(Pool* pool);
// The exporter freed a block: its slot says so; a block another process
// still has imported stays quarantined until that process frees it.
void retire_slot(Pool* pool, std::uintptr_t base, Segment& seg);
// An imported block is gone: its pages are unmapped and its importer count dropped.
void release_imported_block(Pool* pool, unsigned long long block, void* mapping, std::size_t size);
// Quarantined pieces whose importers all freed them go back to the free list.
void release_quarantined(Pool* pool);

}  // namespace fake::mempool

#endif  // CUDYN_TESTS_FAKECUDA_FAKE_POOLS_HPP
