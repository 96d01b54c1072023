// fakecuda_memory.cpp — device memory, copies, sets, pinned / mapped /
// registered host memory, and pointer attributes.
//
// "Device" memory is host memory (anonymous mappings, 4 KiB granular, so it is
// at least 256-byte aligned). Every allocation is tracked; a device address
// that is not inside a tracked allocation is an error, so a library bug turns
// into CUDA_ERROR_INVALID_VALUE instead of a silent write somewhere.
#include "fake_state.hpp"
#include "fake_enum.hpp"

#if !defined(_WIN32)
#include <unistd.h>
#endif


#include <cstring>
#include <initializer_list>

namespace {

using fake::Allocation;
using fake::Kind;
using fake::State;

constexpr unsigned kHostAllocFlags = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
constexpr unsigned kHostRegisterFlags = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                                        CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;

Allocation& track(State& st, std::uintptr_t base, std::size_t size, Kind kind, CUctx_st* ctx, unsigned flags,
                  void* mapping, std::size_t mapping_size) {
    Allocation a;
    a.base = base;
    a.size = size;
    a.kind = kind;
    a.device = ctx ? ctx->device : 0;
    a.ctx = ctx;
    a.flags = flags;
    a.mapping = mapping;
    a.mapping_size = mapping_size;
    a.buffer_id = st.next_buffer_id++;
    return st.allocs.emplace(base, std::move(a)).first->second;
}

// ---- releases -------------------------------------------------------------------------------

// cuMemFree, cuMemFreeHost and cuMemHostUnregister wait for the work of the
// memory's context before they release it (measured: each returned only when
// a kernel still writing the memory from a non-blocking stream was done),
// then release it; `missing` when `base` is no allocation of those kinds.
CUresult free_when_idle(State& st, std::uintptr_t base, std::initializer_list<Kind> kinds, CUresult missing) {
    const auto find = [&]() -> Allocation* {
        auto it = st.allocs.find(base);
        if (it == st.allocs.end()) return nullptr;
        for (Kind kind : kinds)
            if (it->second.kind == kind) return &it->second;
        return nullptr;
    };
    const Allocation* a = find();
    if (!a) return missing;
    if (CUresult rc = fake::wait_context(st, a->ctx)) return rc;
    if (!find()) return missing;  // another thread released it while this one waited
    fake::destroy_allocation(st, st.allocs.find(base));
    return CUDA_SUCCESS;
}

// ---- host memory --------------------------------------------------------------------------

CUresult host_register(void* p, std::size_t n, unsigned flags) {
    State& st = fake::state();
    if (!p || n == 0) return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~kHostRegisterFlags) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* ctx = fake::current_context(st);
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    if (fake::attribute(st, ctx->device, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED) == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    if ((flags & CU_MEMHOSTREGISTER_READ_ONLY) &&
        fake::attribute(st, ctx->device, CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED) == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    const auto begin = reinterpret_cast<std::uintptr_t>(p);
    if (n > ~std::uintptr_t{0} - begin) return CUDA_ERROR_INVALID_VALUE;
    const std::uintptr_t end = begin + n;
    // Any overlap with a tracked range: pinned/registered -> already
    // registered; device/managed memory cannot be registered.
    auto it = st.allocs.lower_bound(begin);
    if (it != st.allocs.begin()) --it;
    for (; it != st.allocs.end() && it->first < end; ++it) {
        const Allocation& a = it->second;
        if (a.base + a.size <= begin) continue;
        if (a.kind == Kind::Host || a.kind == Kind::Registered) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        return CUDA_ERROR_INVALID_VALUE;
    }
    // Without CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM the device sees the
    // memory at a different address: hand out an inaccessible reserved range
    // as its device alias, and translate it in every device-side operation.
    std::uintptr_t alias = 0;
    void* alias_mapping = nullptr;
    if (fake::attribute(st, ctx->device, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM) == 0) {
        alias_mapping = fake::reserve_inaccessible(n);
        if (alias_mapping == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
        alias = reinterpret_cast<std::uintptr_t>(alias_mapping);
    }
    Allocation& a = track(st, begin, n, Kind::Registered, ctx, flags, nullptr, 0);
    a.alias = alias;
    a.alias_mapping = alias_mapping;
    if (alias) st.aliases.emplace(alias, begin);
    return CUDA_SUCCESS;
}

// ---- pointer attributes -----------------------------------------------------------------------

// Attributes are ints here: the caller's CUpointer_attribute, read by fake::raw.
std::size_t attribute_size(int attr) {
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: return sizeof(CUcontext);
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: return sizeof(unsigned int);
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: return sizeof(CUdeviceptr);
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: return sizeof(void*);
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS: return sizeof(CUDA_POINTER_ATTRIBUTE_P2P_TOKENS);
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: return sizeof(bool);
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: return sizeof(unsigned long long);
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: return sizeof(bool);
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: return sizeof(int);
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: return sizeof(bool);
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: return sizeof(CUdeviceptr);
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: return sizeof(size_t);
    case CU_POINTER_ATTRIBUTE_MAPPED: return sizeof(bool);
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: return sizeof(unsigned long long);
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: return sizeof(bool);
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: return sizeof(int);
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: return sizeof(CUmemoryPool);
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: return sizeof(size_t);
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: return sizeof(void*);
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: return sizeof(unsigned long long);
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE: return sizeof(bool);
    default: return 0;
    }
}

// The allocation an address belongs to, through its host address or its
// registered device alias.
Allocation* lookup_pointer(State& st, std::uintptr_t p, bool* via_alias, std::size_t* offset) {
    std::size_t off = 0;
    if (Allocation* a = fake::find_alias(st, p, &off)) {
        *via_alias = true;
        *offset = off;
        return a;
    }
    *via_alias = false;
    Allocation* a = fake::find_allocation(st, p, 0);
    if (a) *offset = p - a->base;
    return a;
}

template <typename T>
void put(void* data, T value) {
    std::memcpy(data, &value, sizeof value);
}

// The block the driver maps an allocation in, as MAPPING_BASE_ADDR /
// MAPPING_SIZE report it (an H200 with driver 580): cuMemAlloc memory lies in
// a 2 MiB block (small allocations share one; here, the 2 MiB-aligned blocks
// that hold the allocation), a pool allocation in the pool's chunk, and VMM
// memory is its own mapping (left as it is, like every other kind). So the
// mapping differs from the allocation (RANGE_START_ADDR / RANGE_SIZE) where
// the real driver's does.
void block_of(const Allocation& a, std::uintptr_t* base, std::size_t* size) {
    constexpr std::uintptr_t kBlock = std::uintptr_t{2} << 20;
    if (a.kind == Kind::Device) {
        const std::uintptr_t first = a.base / kBlock * kBlock;
        const std::uintptr_t end = (a.base + a.size + kBlock - 1) / kBlock * kBlock;
        *base = first;
        *size = static_cast<std::size_t>(end - first);
    } else if (a.kind == Kind::Pool) {
        fake::pool_block_mapping(a, base, size);
    }
}

// Writes one attribute of a tracked allocation. CUDA_ERROR_INVALID_VALUE where
// the attribute has no value for this memory (a device pointer of unmapped
// host memory, a host pointer of device memory).
CUresult pointer_attribute(void* data, int attr, const Allocation& a, bool via_alias,
                           std::size_t off) {
    const bool host_pool = a.kind == Kind::Pool && fake::pool_on_host(a.pool);
    // VMM memory on a host location reads as host memory (measured on an H200).
    const bool host_vmm = a.kind == Kind::VmmMapped && a.host_memory;
    const bool device_kind = a.kind == Kind::Device || a.kind == Kind::Managed ||
                             (a.kind == Kind::VmmMapped && !host_vmm) || a.kind == Kind::IpcOpened ||
                             (a.kind == Kind::Pool && !host_pool);
    const std::uintptr_t visible_base = via_alias ? a.alias : a.base;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: put<CUcontext>(data, a.ctx); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        put<unsigned int>(data, device_kind ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: {
        if (!device_kind && a.kind != Kind::Pool && !host_vmm) {
            // Pinned / registered memory has a device address only when mapped.
            const unsigned devicemap = CU_MEMHOSTALLOC_DEVICEMAP;  // == CU_MEMHOSTREGISTER_DEVICEMAP
            if (!(a.flags & devicemap) && !via_alias) return CUDA_ERROR_INVALID_VALUE;
        }
        const std::uintptr_t dbase = (a.kind == Kind::Registered && a.alias) ? a.alias : a.base;
        put<CUdeviceptr>(data, static_cast<CUdeviceptr>(dbase + off));
        return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (a.kind == Kind::Device || (a.kind == Kind::VmmMapped && !host_vmm) || a.kind == Kind::IpcOpened ||
            (a.kind == Kind::Pool && !host_pool))
            return CUDA_ERROR_INVALID_VALUE;
        put<void*>(data, reinterpret_cast<void*>(a.base + off));
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS: return CUDA_ERROR_NOT_SUPPORTED;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: put<bool>(data, false); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: put<unsigned long long>(data, a.buffer_id); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: put<bool>(data, a.kind == Kind::Managed); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: put<int>(data, a.device); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: put<bool>(data, a.kind == Kind::Device); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        put<CUdeviceptr>(data, static_cast<CUdeviceptr>(a.range_size ? a.range_base : visible_base));
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: put<size_t>(data, a.range_size ? a.range_size : a.size); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED: put<bool>(data, true); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: put<unsigned long long>(data, a.allowed_handle_types); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: put<bool>(data, a.kind == Kind::Device); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        put<int>(data, (a.kind == Kind::Registered && (a.flags & CU_MEMHOSTREGISTER_READ_ONLY))
                           ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ
                           : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: put<CUmemoryPool>(data, a.pool); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: {
        std::uintptr_t mapping_base = visible_base;
        std::size_t mapping_size = a.size;
        block_of(a, &mapping_base, &mapping_size);
        if (attr == CU_POINTER_ATTRIBUTE_MAPPING_SIZE)
            put<size_t>(data, mapping_size);
        else
            put<void*>(data, reinterpret_cast<void*>(mapping_base));
        return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: put<unsigned long long>(data, a.buffer_id); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE: put<bool>(data, false); return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

}  // namespace

// ---- device memory ----------------------------------------------------------------------------

// cuMemAlloc_v2's body, also cuMemAllocPitch_v2's (fakecuda_copy3d.cpp).
CUresult fake::allocate_device_memory(State& st, CUdeviceptr* dptr, std::size_t bytesize) {
    if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* ctx = fake::current_context(st);
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    fake::Device& dev = st.devices[static_cast<std::size_t>(ctx->device)];
    if (bytesize > fake::kTotalMemory - dev.bytes_in_use) return CUDA_ERROR_OUT_OF_MEMORY;
    // Backed by a memfd where the platform has one, so cuIpcGetMemHandle can
    // share it with another process (fakecuda_ipc.cpp).
    const std::size_t offset = bytesize <= fake::kPageSize ? st.small_alloc_offset : 0;
    const int fd = fake::shareable_memory_fd(bytesize + offset);
    std::size_t mapping_size = 0;
    void* m = fake::map_memory(bytesize + offset, &mapping_size, fd);
    if (!m) {
#if !defined(_WIN32)
        if (fd >= 0) ::close(fd);
#endif
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(m) + offset;
    // Memory past a page start is not shared over legacy IPC here (the
    // importer's mapping would start at the page).
#if !defined(_WIN32)
    if (offset != 0 && fd >= 0) ::close(fd);
#endif
    track(st, base, bytesize, Kind::Device, ctx, 0, m, mapping_size).shared_fd = offset == 0 ? fd : -1;
    dev.bytes_in_use += bytesize;
    *dptr = static_cast<CUdeviceptr>(base);
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
    FAKE_ENTER(fake::kNeedsInit);
    return fake::allocate_device_memory(fake::state(), dptr, bytesize);
}

FAKE_API CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (dptr == 0) return CUDA_SUCCESS;
    if (!fake::current_context(st)) return CUDA_ERROR_INVALID_CONTEXT;
    // Stream-ordered allocations: no implicit synchronization (cuda.h says so).
    if (auto it = st.allocs.find(static_cast<std::uintptr_t>(dptr)); it != st.allocs.end() && it->second.kind == Kind::Pool)
        return fake::pool_free_now(st, it->first);
    return free_when_idle(st, static_cast<std::uintptr_t>(dptr), {Kind::Device, Kind::Managed}, CUDA_ERROR_INVALID_VALUE);
}

FAKE_API CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!free || !total) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* ctx = fake::current_context(st);
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    const auto used = st.devices[static_cast<std::size_t>(ctx->device)].bytes_in_use;
    *total = static_cast<size_t>(fake::kTotalMemory);
    *free = static_cast<size_t>(fake::kTotalMemory - used);
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    bool via_alias = false;
    std::size_t off = 0;
    const Allocation* a = lookup_pointer(st, static_cast<std::uintptr_t>(dptr), &via_alias, &off);
    if (!a) return CUDA_ERROR_NOT_FOUND;
    if (pbase) *pbase = static_cast<CUdeviceptr>(via_alias ? a->alias : a->base);
    if (psize) *psize = a->size;
    return CUDA_SUCCESS;
}

// ---- pinned, mapped and registered host memory -----------------------------------------------------

FAKE_API CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!pp || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    if (Flags & ~kHostAllocFlags) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* ctx = fake::current_context(st);
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    std::size_t mapping_size = 0;
    void* m = fake::map_memory(bytesize, &mapping_size);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    track(st, reinterpret_cast<std::uintptr_t>(m), bytesize, Kind::Host, ctx, Flags, m, mapping_size);
    *pp = m;
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuMemFreeHost(void* p) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!fake::current_context(st)) return CUDA_ERROR_INVALID_CONTEXT;
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    return free_when_idle(st, reinterpret_cast<std::uintptr_t>(p), {Kind::Host}, CUDA_ERROR_INVALID_VALUE);
}

FAKE_API CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p, unsigned int Flags) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!pdptr || !p || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* ctx = fake::current_context(st);
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    if (fake::attribute(st, ctx->device, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY) == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    const Allocation* a = fake::find_allocation(st, addr, 0);
    if (!a) return CUDA_ERROR_INVALID_VALUE;
    const bool mapped = (a->kind == Kind::Host && (a->flags & CU_MEMHOSTALLOC_DEVICEMAP)) ||
                        (a->kind == Kind::Registered && (a->flags & CU_MEMHOSTREGISTER_DEVICEMAP));
    if (!mapped) return CUDA_ERROR_INVALID_VALUE;
    const std::uintptr_t dbase = a->alias ? a->alias : a->base;
    *pdptr = static_cast<CUdeviceptr>(dbase + (addr - a->base));
    return CUDA_SUCCESS;
}

// v1 (4000) and v2 (6050) share the ABI; the v2 accepted more flags.
FAKE_API CUresult CUDAAPI cuMemHostRegister(void* p, size_t bytesize, unsigned int Flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return host_register(p, bytesize, Flags);
}

FAKE_API CUresult CUDAAPI cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int Flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return host_register(p, bytesize, Flags);
}

FAKE_API CUresult CUDAAPI cuMemHostUnregister(void* p) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::current_context(st)) return CUDA_ERROR_INVALID_CONTEXT;
    return free_when_idle(st, reinterpret_cast<std::uintptr_t>(p), {Kind::Registered},
                          CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

// ---- pointer attributes ------------------------------------------------------------------------------

FAKE_API CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    const int attr = fake::raw(attribute);
    if (!data || attribute_size(attr) == 0) return CUDA_ERROR_INVALID_VALUE;
    bool via_alias = false;
    std::size_t off = 0;
    const Allocation* a = lookup_pointer(st, static_cast<std::uintptr_t>(ptr), &via_alias, &off);
    if (!a) return CUDA_ERROR_INVALID_VALUE;
    return pointer_attribute(data, attr, *a, via_alias, off);
}

// Unlike cuPointerGetAttribute, an address the driver does not know is not an
// error: every requested value is zero / null.
FAKE_API CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute* attributes,
                                                 void** data, CUdeviceptr ptr) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (numAttributes == 0 || !attributes || !data) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < numAttributes; ++i) {
        if (attribute_size(fake::raw(attributes[i])) == 0 || !data[i]) return CUDA_ERROR_INVALID_VALUE;
    }
    bool via_alias = false;
    std::size_t off = 0;
    const Allocation* a = lookup_pointer(st, static_cast<std::uintptr_t>(ptr), &via_alias, &off);
    for (unsigned i = 0; i < numAttributes; ++i) {
        const int attr = fake::raw(attributes[i]);
        std::memset(data[i], 0, attribute_size(attr));
        if (a) (void)pointer_attribute(data[i], attr, *a, via_alias, off);
    }
    return CUDA_SUCCESS;
}
