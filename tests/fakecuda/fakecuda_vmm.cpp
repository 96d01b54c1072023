// fakecuda_vmm.cpp — virtual memory management on host virtual memory
// (Linux; every variant but legacy, a CUDA 10.1 driver): reservations are
// inaccessible mappings, physical memory is memfds mapped over them, so
// cudyn's VMM types run without a GPU. Mapped ranges are State::allocs
// entries (Kind::VmmMapped) that pointer queries, copies and sets see.
#include "fake_state.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace {

using fake::State;

struct Physical {
    int fd = -1;
    std::size_t size = 0;
    CUmemAllocationProp prop{};
    int device = -1;       // the device whose memory it is (-1: host)
    long references = 1;   // cuMemCreate / import / retain, each paired with a cuMemRelease
    long mappings = 0;
    bool imported = false;  // from a shareable handle: a checkpoint leaves its bytes alone
};

struct Mapping {
    std::size_t size = 0;
    CUmemGenericAllocationHandle handle = 0;
    std::uintptr_t reservation = 0;
    std::map<std::pair<int, int>, unsigned long long> access;  // (location type, id) -> flags
};

struct Vmm {
    std::map<std::uintptr_t, std::size_t> reservations;  // base -> size
    std::map<CUmemGenericAllocationHandle, Physical> physicals;
    std::map<std::uintptr_t, Mapping> mappings;           // base -> mapping
    CUmemGenericAllocationHandle next_handle = 0x7e000001;
};

// Guarded by State::mu like everything else (every caller holds it).
Vmm& vmm() {
    static Vmm* v = new Vmm();  // never destroyed, like the State
    return *v;
}

// The reservation holding all of [p, p + n), or end().
std::map<std::uintptr_t, std::size_t>::iterator reservation_of(std::uintptr_t p, std::size_t n) {
    auto& r = vmm().reservations;
    auto it = r.upper_bound(p);
    if (it == r.begin()) return r.end();
    --it;
    if (p - it->first >= it->second || n > it->second - (p - it->first)) return r.end();
    return it;
}

int protection_of(const Mapping& mapping) {
    unsigned long long all = 0;
    for (const auto& kv : mapping.access) all |= kv.second;
    if ((all & CU_MEM_ACCESS_FLAGS_PROT_READWRITE) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) return PROT_READ | PROT_WRITE;
    if (all & CU_MEM_ACCESS_FLAGS_PROT_READ) return PROT_READ;
    return PROT_NONE;
}

}  // namespace

namespace fake {

int vmm_check(State&, std::uintptr_t p, std::size_t n) {
    Vmm& v = vmm();
    if (reservation_of(p, 1) == v.reservations.end()) return 0;
    if (n == 0) n = 1;
    // Walk the mappings from the one holding p: contiguous, accessible, to p + n.
    auto it = v.mappings.upper_bound(p);
    if (it == v.mappings.begin()) return -1;
    --it;
    std::uintptr_t at = p;
    if (at - it->first >= it->second.size) return -1;
    const std::uintptr_t end = (n > ~std::uintptr_t{0} - p) ? ~std::uintptr_t{0} : p + n;
    while (true) {
        if (protection_of(it->second) != (PROT_READ | PROT_WRITE)) return -1;
        const std::uintptr_t mapping_end = it->first + it->second.size;
        if (mapping_end >= end) return 1;
        at = mapping_end;
        ++it;
        if (it == v.mappings.end() || it->first != at) return -1;
    }
}

int vmm_backing(State&, std::uintptr_t p, std::size_t n, CUmemLocation* location) {
    Vmm& v = vmm();
    if (reservation_of(p, 1) == v.reservations.end()) return 0;
    if (n == 0 || reservation_of(p, n) == v.reservations.end()) return -1;
    auto it = v.mappings.upper_bound(p);
    if (it == v.mappings.begin()) return -1;
    --it;
    if (p - it->first >= it->second.size) return -1;
    const Physical* first = nullptr;
    const std::uintptr_t end = p + n;
    while (true) {
        auto found = v.physicals.find(it->second.handle);
        if (found == v.physicals.end()) return -1;
        const CUmemAllocationProp& prop = found->second.prop;
        if (first == nullptr) {
            first = &found->second;
        } else if (prop.location.type != first->prop.location.type || prop.location.id != first->prop.location.id ||
                   prop.requestedHandleTypes != first->prop.requestedHandleTypes ||
                   prop.allocFlags.gpuDirectRDMACapable != first->prop.allocFlags.gpuDirectRDMACapable) {
            return -1;
        }
        const std::uintptr_t mapping_end = it->first + it->second.size;
        if (mapping_end >= end) break;
        ++it;
        if (it == v.mappings.end() || it->first != mapping_end) return -1;
    }
    *location = first->prop.location;
    return 1;
}

}  // namespace fake

#if FAKE_HAS(10020)

namespace {

constexpr std::size_t kGranularity = std::size_t{2} << 20;

void update_count(State& st) {
    const Vmm& v = vmm();
    st.vmm_objects = static_cast<long>(v.reservations.size() + v.physicals.size() + v.mappings.size());
}

bool aligned(std::uintptr_t x) { return x % kGranularity == 0; }

// The mappings that exactly tile [p, p + n), in order; false when a byte of
// the range is unmapped or a mapping sticks out of it.
bool tiling_mappings(std::uintptr_t p, std::size_t n, std::vector<std::map<std::uintptr_t, Mapping>::iterator>* out) {
    auto& m = vmm().mappings;
    if (n > ~std::uintptr_t{0} - p) return false;
    auto it = m.find(p);
    std::uintptr_t at = p;
    const std::uintptr_t end = p + n;
    while (at < end) {
        if (it == m.end() || it->first != at || it->second.size > end - at) return false;
        if (out) out->push_back(it);
        at += it->second.size;
        ++it;
    }
    return n != 0;
}

// Where an allocation may live, as cuMemCreate (`creating`) and the
// granularity query check it. The query is the more lenient (measured on an
// H200, docs/measurements/h200-2026-11-25-batch-dmabuf-hostvmm-pointers.md):
// it answers for HOST with a POSIX-fd handle type, for HOST_NUMA_CURRENT and
// for a HOST_NUMA id that is no node, all of which cuMemCreate refuses.
CUresult check_prop(const State& st, const CUmemAllocationProp* prop, bool creating) {
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    const unsigned known = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_WIN32 |
                           CU_MEM_HANDLE_TYPE_WIN32_KMT | CU_MEM_HANDLE_TYPE_FABRIC;
    const auto handles = static_cast<unsigned>(prop->requestedHandleTypes);
    if (handles & ~known) return CUDA_ERROR_INVALID_VALUE;
    int judge = 0;  // the device whose attributes decide
    switch (prop->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        if (!fake::valid_device(st, prop->location.id)) return CUDA_ERROR_INVALID_DEVICE;
        judge = prop->location.id;
        if (fake::attribute(st, judge, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) == 0)
            return CUDA_ERROR_NOT_SUPPORTED;
        break;
    case CU_MEM_LOCATION_TYPE_HOST:
        if (creating && handles != 0) return CUDA_ERROR_INVALID_VALUE;
        if (fake::attribute(st, 0, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) == 0)
            return CUDA_ERROR_NOT_SUPPORTED;
        break;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        if (prop->location.id < 0 || (creating && prop->location.id >= st.numa_nodes)) return CUDA_ERROR_INVALID_VALUE;
        if (fake::attribute(st, 0, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) == 0)
            return CUDA_ERROR_NOT_SUPPORTED;
        break;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        if (creating) return CUDA_ERROR_INVALID_VALUE;
        if (fake::attribute(st, 0, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) == 0)
            return CUDA_ERROR_NOT_SUPPORTED;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    if ((handles & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) &&
        fake::attribute(st, judge, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    if ((handles & CU_MEM_HANDLE_TYPE_FABRIC) &&
        fake::attribute(st, judge, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED) == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    if ((handles & (CU_MEM_HANDLE_TYPE_WIN32 | CU_MEM_HANDLE_TYPE_WIN32_KMT)) != 0) return CUDA_ERROR_NOT_SUPPORTED;
    if (prop->allocFlags.gpuDirectRDMACapable &&
        fake::attribute(st, judge, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED) == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    return CUDA_SUCCESS;
}

// A location cuMemSetAccess / cuMemGetAccess accept.
CUresult check_access_location(const State& st, const CUmemLocation& loc) {
    switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE: return fake::valid_device(st, loc.id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    case CU_MEM_LOCATION_TYPE_HOST: return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        return (loc.id >= 0 && loc.id < st.numa_nodes) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

std::pair<int, int> access_key(const CUmemLocation& loc) {
    // Plain host access has no id; the driver ignores it.
    return {static_cast<int>(loc.type), loc.type == CU_MEM_LOCATION_TYPE_HOST ? 0 : loc.id};
}

// A live handle (not yet released by all of its references).
Physical* live_handle(CUmemGenericAllocationHandle handle) {
    auto it = vmm().physicals.find(handle);
    if (it == vmm().physicals.end() || it->second.references <= 0) return nullptr;
    return &it->second;
}

// Frees the memory once no reference and no mapping remain.
void drop_if_unused(State& st, CUmemGenericAllocationHandle handle) {
    auto it = vmm().physicals.find(handle);
    if (it == vmm().physicals.end()) return;
    Physical& p = it->second;
    if (p.references > 0 || p.mappings > 0) return;
    ::close(p.fd);
    if (p.device >= 0) {
        auto& used = st.devices[static_cast<std::size_t>(p.device)].bytes_in_use;
        used -= (p.size <= used) ? p.size : used;
    }
    vmm().physicals.erase(it);
}

CUmemGenericAllocationHandle add_physical(State& st, int fd, std::size_t size, const CUmemAllocationProp& prop) {
    Physical p;
    p.fd = fd;
    p.size = size;
    p.prop = prop;
    p.device = prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop.location.id : -1;
    if (p.device >= 0) st.devices[static_cast<std::size_t>(p.device)].bytes_in_use += size;
    const CUmemGenericAllocationHandle handle = vmm().next_handle++;
    vmm().physicals.emplace(handle, p);
    update_count(st);
    return handle;
}

// The 64-byte fabric handle names the memory: who exported it and where.
struct FabricBlob {
    char magic[8];  // "FAKEFAB1"
    std::int32_t pid;
    std::int32_t fd;  // the exporter's memfd
    std::uint64_t size;
    std::uint64_t handle;
    std::int32_t location_type;
    std::int32_t location_id;
    unsigned char unused[24];
};
static_assert(sizeof(FabricBlob) == sizeof(CUmemFabricHandle), "the fabric blob fills CUmemFabricHandle");

// The creator's properties when the memfd is one of ours, else a POSIX-fd
// allocation on device 0 (the importer cannot know more).
CUmemAllocationProp props_for(int fd) {
    struct stat wanted{};
    if (::fstat(fd, &wanted) == 0) {
        for (const auto& kv : vmm().physicals) {
            struct stat have{};
            if (::fstat(kv.second.fd, &have) == 0 && have.st_dev == wanted.st_dev && have.st_ino == wanted.st_ino)
                return kv.second.prop;
        }
    }
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    return prop;
}

CUresult import_fd(State& st, int fd, CUmemGenericAllocationHandle* handle) {
    struct stat info{};
    if (fd < 0 || ::fstat(fd, &info) != 0 || info.st_size <= 0 || !aligned(static_cast<std::uintptr_t>(info.st_size)))
        return CUDA_ERROR_INVALID_VALUE;
    const int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    *handle = add_physical(st, own, static_cast<std::size_t>(info.st_size), props_for(fd));
    vmm().physicals[*handle].imported = true;
    return CUDA_SUCCESS;
}

}  // namespace

// How each entry is emulated:
//   cuMemAddressReserve   an inaccessible (PROT_NONE) anonymous mapping, aligned as asked
//   cuMemCreate           a memfd of the requested size
//   cuMemMap              the memfd mapped MAP_SHARED|MAP_FIXED over part of a reservation,
//                         still PROT_NONE: mapped memory is inaccessible until cuMemSetAccess
//   cuMemSetAccess        mprotect with the union of every location's flags
//   cuMemUnmap            PROT_NONE anonymous memory mapped back over the range
//   cuMemRelease          drops a handle reference; the memfd is closed when no
//                         reference and no mapping remain (release while mapped is allowed)
//   cuMemAddressFree      munmap; refused while anything is mapped in the range
// Granularity is 2 MiB (minimum and recommended); sizes, addresses and
// offsets are checked as the driver checks them (INVALID_VALUE). Live
// reservations, physical allocations and mappings count in State::vmm_objects.
FAKE_API CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                                        CUmemAllocationGranularity_flags option) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!granularity) return CUDA_ERROR_INVALID_VALUE;
    if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
        return CUDA_ERROR_INVALID_VALUE;
    if (CUresult rc = check_prop(st, prop, false)) return rc;
    *granularity = kGranularity;
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                              unsigned long long flags) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!ptr || size == 0 || !aligned(size) || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (alignment != 0 && (alignment & (alignment - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
    if (alignment < kGranularity) alignment = kGranularity;
    if (size > ~std::size_t{0} - alignment) return CUDA_ERROR_INVALID_VALUE;
    const int prot = PROT_NONE;
    const int anon = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    void* base = MAP_FAILED;
    // The hint first, exactly there or not at all; else anywhere, trimmed to the alignment.
    if (addr != 0 && addr % alignment == 0) {
        base = ::mmap(reinterpret_cast<void*>(static_cast<std::uintptr_t>(addr)), size, prot, anon | MAP_FIXED_NOREPLACE,
                      -1, 0);
        if (base != MAP_FAILED && reinterpret_cast<std::uintptr_t>(base) != addr) {
            ::munmap(base, size);  // an old kernel took it as a plain hint
            base = MAP_FAILED;
        }
    }
    if (base == MAP_FAILED) {
        void* wide = ::mmap(nullptr, size + alignment, prot, anon, -1, 0);
        if (wide == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
        const auto start = reinterpret_cast<std::uintptr_t>(wide);
        const std::uintptr_t first = (start + alignment - 1) / alignment * alignment;
        if (first > start) ::munmap(wide, first - start);
        const std::uintptr_t tail = start + size + alignment - (first + size);
        if (tail > 0) ::munmap(reinterpret_cast<void*>(first + size), tail);
        base = reinterpret_cast<void*>(first);
    }
    const auto b = reinterpret_cast<std::uintptr_t>(base);
    vmm().reservations.emplace(b, size);
    update_count(st);
    *ptr = static_cast<CUdeviceptr>(b);
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    const auto p = static_cast<std::uintptr_t>(ptr);
    auto it = vmm().reservations.find(p);
    if (it == vmm().reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
    auto mapped = vmm().mappings.lower_bound(p);
    if (mapped != vmm().mappings.end() && mapped->first < p + size) return CUDA_ERROR_INVALID_VALUE;  // still mapped
    ::munmap(reinterpret_cast<void*>(p), size);
    vmm().reservations.erase(it);
    update_count(st);
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                      unsigned long long flags) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!handle || size == 0 || !aligned(size) || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult rc = check_prop(st, prop, true)) return rc;
    // The granularity query takes fabric memory; creating it needs the channel.
    if ((prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC) && !st.imex_channel)
        return CUDA_ERROR_NOT_PERMITTED;
    if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
        size > fake::kTotalMemory - st.devices[static_cast<std::size_t>(prop->location.id)].bytes_in_use)
        return CUDA_ERROR_OUT_OF_MEMORY;
    const int fd = ::memfd_create("fakecuda-vmm", MFD_CLOEXEC);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
        ::close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    // Plain host memory is placed on a node: its properties read back as
    // HOST_NUMA, node 0 on the one-node machine it was measured on.
    CUmemAllocationProp placed = *prop;
    if (placed.location.type == CU_MEM_LOCATION_TYPE_HOST) {
        placed.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
        placed.location.id = 0;
    }
    *handle = add_physical(st, fd, size, placed);
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    Physical* p = live_handle(handle);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    --p->references;
    drop_if_unused(st, handle);
    update_count(st);
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                                   unsigned long long flags) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    const auto p = static_cast<std::uintptr_t>(ptr);
    if (size == 0 || !aligned(p) || !aligned(size) || offset != 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    Physical* physical = live_handle(handle);
    if (!physical || size > physical->size) return CUDA_ERROR_INVALID_VALUE;
    auto reservation = reservation_of(p, size);
    if (reservation == vmm().reservations.end()) return CUDA_ERROR_INVALID_VALUE;
    // No overlap with a live mapping.
    auto next = vmm().mappings.lower_bound(p);
    if (next != vmm().mappings.end() && next->first < p + size) return CUDA_ERROR_INVALID_VALUE;
    if (next != vmm().mappings.begin() && std::prev(next)->first + std::prev(next)->second.size > p)
        return CUDA_ERROR_INVALID_VALUE;
    void* m = ::mmap(reinterpret_cast<void*>(p), size, PROT_NONE, MAP_SHARED | MAP_FIXED, physical->fd, 0);
    if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;

    Mapping mapping;
    mapping.size = size;
    mapping.handle = handle;
    mapping.reservation = reservation->first;
    vmm().mappings.emplace(p, mapping);
    ++physical->mappings;

    fake::Allocation a;
    a.base = p;
    a.size = size;
    a.kind = fake::Kind::VmmMapped;
    a.device = physical->device >= 0 ? physical->device : 0;
    a.buffer_id = st.next_buffer_id++;
    a.range_base = reservation->first;
    a.range_size = reservation->second;
    a.allowed_handle_types = static_cast<unsigned long long>(physical->prop.requestedHandleTypes);
    a.host_memory = physical->device < 0;
    a.imported = physical->imported;
    st.allocs.emplace(p, std::move(a));
    update_count(st);
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    const auto p = static_cast<std::uintptr_t>(ptr);
    std::vector<std::map<std::uintptr_t, Mapping>::iterator> pieces;
    if (!tiling_mappings(p, size, &pieces)) return CUDA_ERROR_INVALID_VALUE;
    for (auto it : pieces) {
        void* back = ::mmap(reinterpret_cast<void*>(it->first), it->second.size, PROT_NONE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        if (back == MAP_FAILED) std::fprintf(stderr, "fakecuda: cuMemUnmap could not restore the reservation\n");
        const CUmemGenericAllocationHandle handle = it->second.handle;
        st.allocs.erase(it->first);
        vmm().mappings.erase(it);
        --vmm().physicals[handle].mappings;
        drop_if_unused(st, handle);
    }
    update_count(st);
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
    std::vector<std::map<std::uintptr_t, Mapping>::iterator> pieces;
    if (!tiling_mappings(static_cast<std::uintptr_t>(ptr), size, &pieces)) return CUDA_ERROR_INVALID_VALUE;
    for (std::size_t i = 0; i < count; ++i) {
        if (CUresult rc = check_access_location(st, desc[i].location)) return rc;
        const auto f = static_cast<unsigned>(desc[i].flags);
        if (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
        // A device reaches another device's memory only over a peer path.
        if (desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE && f != CU_MEM_ACCESS_FLAGS_PROT_NONE) {
            for (auto it : pieces) {
                const int owner = vmm().physicals[it->second.handle].device;
                const int accessor = desc[i].location.id;
                if (owner >= 0 && owner != accessor && st.peer[accessor][owner] == 0) return CUDA_ERROR_INVALID_DEVICE;
            }
        }
    }
    for (auto it : pieces) {
        for (std::size_t i = 0; i < count; ++i)
            it->second.access[access_key(desc[i].location)] = static_cast<unsigned long long>(desc[i].flags);
        ::mprotect(reinterpret_cast<void*>(it->first), it->second.size, protection_of(it->second));
    }
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!flags || !location) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult rc = check_access_location(st, *location)) return rc;
    const auto p = static_cast<std::uintptr_t>(ptr);
    auto it = vmm().mappings.upper_bound(p);
    if (it == vmm().mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
    --it;
    if (p - it->first >= it->second.size) return CUDA_ERROR_INVALID_VALUE;
    auto found = it->second.access.find(access_key(*location));
    *flags = found == it->second.access.end() ? 0ULL : found->second;
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuMemExportToShareableHandle(void* shareableHandle, CUmemGenericAllocationHandle handle,
                                                       CUmemAllocationHandleType handleType,
                                                       unsigned long long flags) {
    FAKE_ENTER(fake::kNeedsInit);
    if (!shareableHandle || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    Physical* p = live_handle(handle);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    // Only a type requested at cuMemCreate can be exported.
    if ((static_cast<unsigned>(p->prop.requestedHandleTypes) & static_cast<unsigned>(handleType)) == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (handleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        const int fd = ::fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
        std::memcpy(shareableHandle, &fd, sizeof fd);
        return CUDA_SUCCESS;
    }
    if (handleType == CU_MEM_HANDLE_TYPE_FABRIC) {
        FabricBlob blob{};
        std::memcpy(blob.magic, "FAKEFAB1", sizeof blob.magic);
        blob.pid = static_cast<std::int32_t>(::getpid());
        blob.fd = p->fd;
        blob.size = p->size;
        blob.handle = handle;
        blob.location_type = static_cast<std::int32_t>(p->prop.location.type);
        blob.location_id = p->prop.location.id;
        std::memcpy(shareableHandle, &blob, sizeof blob);
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                                         CUmemAllocationHandleType shHandleType) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    if (shHandleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return import_fd(st, static_cast<int>(reinterpret_cast<std::intptr_t>(osHandle)), handle);
    if (shHandleType == CU_MEM_HANDLE_TYPE_FABRIC) {
        if (!osHandle) return CUDA_ERROR_INVALID_VALUE;
        FabricBlob blob{};
        std::memcpy(&blob, osHandle, sizeof blob);
        if (std::memcmp(blob.magic, "FAKEFAB1", sizeof blob.magic) != 0) return CUDA_ERROR_INVALID_VALUE;
        if (blob.pid == static_cast<std::int32_t>(::getpid())) {
            Physical* p = live_handle(blob.handle);
            if (!p) return CUDA_ERROR_INVALID_VALUE;
            return import_fd(st, p->fd, handle);
        }
        // Another process's memfd, through /proc (same user).
        char path[64];
        std::snprintf(path, sizeof path, "/proc/%d/fd/%d", static_cast<int>(blob.pid), static_cast<int>(blob.fd));
        const int fd = ::open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) return CUDA_ERROR_INVALID_VALUE;
        const CUresult rc = import_fd(st, fd, handle);
        ::close(fd);
        return rc;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                                 CUmemGenericAllocationHandle handle) {
    FAKE_ENTER(fake::kNeedsInit);
    if (!prop) return CUDA_ERROR_INVALID_VALUE;
    Physical* p = live_handle(handle);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    *prop = p->prop;
    return CUDA_SUCCESS;
}

#if FAKE_HAS(11000)
FAKE_API CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    const auto p = reinterpret_cast<std::uintptr_t>(addr);
    auto it = vmm().mappings.upper_bound(p);
    if (it == vmm().mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
    --it;
    if (p - it->first >= it->second.size) return CUDA_ERROR_INVALID_VALUE;
    Physical& physical = vmm().physicals[it->second.handle];
    ++physical.references;
    *handle = it->second.handle;
    update_count(st);
    return CUDA_SUCCESS;
}
#endif  // FAKE_HAS(11000)

#endif  // FAKE_HAS(10020)
