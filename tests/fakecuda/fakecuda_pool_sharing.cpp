// fakecuda_pool_sharing.cpp — memory-pool IPC (Linux): an exportable pool's
// chunks lie in one memfd whose first MiB is a header shared with importing
// processes, a slot per exported block (block id, offset, size, importer
// count). Pool handles name the memfd (a duplicate fd, or pid + fd for
// fabric); pointer exports name a slot; importers map the block's pages, so
// both processes share its bytes. README.md describes the rules.
#include "fake_pools.hpp"
#include "fake_enum.hpp"

#if defined(__linux__)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>

namespace fake::mempool {

#if defined(__linux__)

struct SharedPoolHeader {
    char magic[8];
    std::int32_t creator_pid;
    std::int32_t location_type;
    std::int32_t location_id;
    std::uint32_t handle_types;
    std::uint32_t slot_count;
    std::uint32_t unused;
};

namespace {

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

constexpr std::size_t kSlotsAt = 64;
static_assert(sizeof(SharedPoolHeader) <= kSlotsAt, "the slots follow the header");
constexpr char kPoolMagic[8] = {'F', 'A', 'K', 'E', 'P', 'O', 'O', 'L'};
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

}  // namespace
#endif  // __linux__

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

void release_imported_block(Pool* pool, unsigned long long block, void* mapping, std::size_t size) {
#if defined(__linux__)
    ::munmap(mapping, size);
#else
    (void)mapping;
    (void)size;
#endif
    auto it = pools().import_slots.find(block);
    if (it == pools().import_slots.end()) return;
#if defined(__linux__)
    if (SharedSlot* s = slot_at(pool, it->second)) s->importers.fetch_sub(1);
#else
    (void)pool;
#endif
    pools().import_slots.erase(it);
}

void release_quarantined(Pool* pool) {
#if defined(__linux__)
    if (pool->quarantined == 0) return;
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
#else
    (void)pool;
#endif
}

#if defined(__linux__)

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
#else
CUresult make_shareable(Pool*) { return CUDA_ERROR_NOT_SUPPORTED; }
#endif

}  // namespace fake::mempool

using namespace fake::mempool;
using fake::Allocation;
using fake::Kind;
using fake::State;

// ---- entry points -----------------------------------------------------------------------------------

#if FAKE_HAS(11020)

#if defined(__linux__)
namespace {

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
    a.imported = true;  // the exporter's bytes: a checkpoint of this process leaves them alone
    pools().import_slots.emplace(a.buffer_id, blob.slot);
    pool->used += a.size;
    pool->reserved += length;
    ++pool->blocks;
    note_usage(pool);
    *out = static_cast<CUdeviceptr>(a.base);
    st.allocs.emplace(a.base, std::move(a));
    return CUDA_SUCCESS;
}

}  // namespace
#endif  // __linux__

FAKE_API CUresult CUDAAPI cuMemPoolExportToShareableHandle(void* handle_out, CUmemoryPool pool,
                                                           CUmemAllocationHandleType handleType,
                                                           unsigned long long flags) {
    ::fake::Call fake_call_(__func__, fake::kNeedsInit);
    const auto type = static_cast<unsigned>(fake::raw(handleType));
    if (fake_call_.done()) {
        // An injected NOT_PERMITTED of a fabric export is a refusal like the
        // modelled one: it leaves the pool in the state the driver crashed in.
        if (fake_call_.rc() == CUDA_ERROR_NOT_PERMITTED && type == CU_MEM_HANDLE_TYPE_FABRIC && live_pool(pool) &&
            !pool->imported && (pool->handle_types & type) != 0)
            pool->fabric_export_refused = true;
        return fake_call_.rc();
    }
    if (!handle_out || flags != 0 || !live_pool(pool) || pool->imported) return CUDA_ERROR_INVALID_VALUE;
    // Only a handle type the pool was created with.
    if (type == 0 || (type & (type - 1)) != 0 || (pool->handle_types & type) == 0) return CUDA_ERROR_INVALID_VALUE;
#if defined(__linux__)
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR && type != CU_MEM_HANDLE_TYPE_FABRIC)
        return CUDA_ERROR_NOT_SUPPORTED;
    // A fabric pool is created without an IMEX channel (as on the H200); its
    // export is where the channel is needed, and the refusal leaves the pool
    // undestroyable (cuMemPoolDestroy then crashed driver 580).
    if (type == CU_MEM_HANDLE_TYPE_FABRIC && !fake::state().imex_channel) {
        pool->fabric_export_refused = true;
        return CUDA_ERROR_NOT_PERMITTED;
    }
    const CUresult rc = export_pool(pool, handle_out, type);
    if (rc == CUDA_SUCCESS) pool->exported = true;
    return rc;
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
    // Only once the pool itself was exported (any handle type): driver 580
    // on an H200 refused the pointer of a never-exported pool.
    if (!pool->exported) return CUDA_ERROR_INVALID_VALUE;
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
