// cudyn-bench's null driver: a libcuda.so.1 whose hot entries answer at once,
// for `cudyn-bench --overhead`. cudyn's own work per operation is tens of
// nanoseconds; against the emulated fake (microseconds per allocation) or a
// real driver it drowns in the driver's time and its noise. Here the entries
// the timed operations call do nothing but hand back a valid answer, so
// cudyn minus raw is cudyn's own work.
//
// Everything else (devices, attributes, primary contexts, streams, pools,
// peer access) is the emulated fake's: cuGetProcAddress forwards to the
// driver named by CUDYN_NULL_DRIVER_BACKING, and only the names below are
// answered here. Addresses are slots: allocation k lives at k << 40 and its
// size is kept per slot, so cuMemGetAddressRange answers without a search.
// Each answered entry counts its calls (cudyn_null_driver_calls), so the
// benchmark can say how many driver calls cudyn adds.
//
// Only what the overhead cases do is modelled: one thread's current context
// is cached (refreshed from the backing driver after any call that may
// change it), and the memory these entries hand out is never touched.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

// ---- the backing driver ----------------------------------------------------------------------

void* backing_library() {
    static void* const library = [] {
        const char* path = std::getenv("CUDYN_NULL_DRIVER_BACKING");
        void* opened = path != nullptr ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
        if (opened == nullptr)
            std::fprintf(stderr, "null driver: CUDYN_NULL_DRIVER_BACKING=%s could not be opened: %s\n",
                         path != nullptr ? path : "(unset)", path != nullptr ? dlerror() : "");
        return opened;
    }();
    return library;
}

template <typename Function>
Function backing_symbol(const char* name) {
    void* library = backing_library();
    return library != nullptr ? reinterpret_cast<Function>(dlsym(library, name)) : nullptr;
}

// The backing driver's entry `name` at ABI `version` (legacy stream).
template <typename Function>
Function backing_entry(const char* name, int version) {
    static const auto proc = backing_symbol<PFN_cuGetProcAddress_v12000>("cuGetProcAddress_v2");
    void* function = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (proc == nullptr || proc(name, &function, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) != CUDA_SUCCESS ||
        status != CU_GET_PROC_ADDRESS_SUCCESS)
        return nullptr;
    return reinterpret_cast<Function>(function);
}

// ---- call counts -----------------------------------------------------------------------------

enum Counted : int {
    kCtxGetCurrent, kCtxSetCurrent, kMemAlloc, kMemFree, kMemAllocAsync, kMemAllocFromPoolAsync, kMemFreeAsync,
    kIpcGetMemHandle, kMemGetAddressRange, kMemAddressReserve, kMemAddressFree, kMemCreate, kMemRelease, kMemMap,
    kMemUnmap, kMemSetAccess, kMemGetAccess, kMemGetAllocationGranularity, kCtxSynchronize, kPrimaryCtxGetState,
    kCountedEntries
};
const char* const counted_names[kCountedEntries] = {
    "cuCtxGetCurrent", "cuCtxSetCurrent", "cuMemAlloc", "cuMemFree", "cuMemAllocAsync", "cuMemAllocFromPoolAsync",
    "cuMemFreeAsync", "cuIpcGetMemHandle", "cuMemGetAddressRange", "cuMemAddressReserve", "cuMemAddressFree",
    "cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuMemGetAccess",
    "cuMemGetAllocationGranularity", "cuCtxSynchronize", "cuDevicePrimaryCtxGetState"};
std::atomic<std::uint64_t> calls[kCountedEntries];

inline void count(Counted entry) { calls[entry].fetch_add(1, std::memory_order_relaxed); }

// ---- addresses -------------------------------------------------------------------------------

constexpr unsigned kSlotShift = 40;
constexpr std::uint64_t kSlots = 4096;
std::atomic<std::uint64_t> next_slot{1};
std::atomic<std::uint64_t> slot_bytes[kSlots];

CUdeviceptr hand_out(std::size_t bytes) {
    const std::uint64_t slot = next_slot.fetch_add(1, std::memory_order_relaxed) % kSlots;
    slot_bytes[slot].store(bytes, std::memory_order_relaxed);
    return static_cast<CUdeviceptr>((slot == 0 ? kSlots : slot) << kSlotShift);
}

// ---- the current context, cached per thread -----------------------------------------------------

// Initial-exec: one load at a fixed offset from the thread pointer, as a real
// driver's current-context query is (general-dynamic, the -fPIC default,
// would add a __tls_get_addr call to every query).
__attribute__((tls_model("initial-exec"))) thread_local CUcontext cached_current = nullptr;
__attribute__((tls_model("initial-exec"))) thread_local bool current_known = false;

CUresult refresh_current() {
    static const auto get = backing_entry<PFN_cuCtxGetCurrent_v4000>("cuCtxGetCurrent", 4000);
    if (get == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    const CUresult rc = get(&cached_current);
    current_known = rc == CUDA_SUCCESS;
    return rc;
}

CUresult CUDAAPI null_ctx_get_current(CUcontext* context) {
    count(kCtxGetCurrent);
    if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!current_known) {
        if (const CUresult rc = refresh_current(); rc != CUDA_SUCCESS) return rc;
    }
    *context = cached_current;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI null_ctx_set_current(CUcontext context) {
    count(kCtxSetCurrent);
    if (current_known && context == cached_current) return CUDA_SUCCESS;
    static const auto set = backing_entry<PFN_cuCtxSetCurrent_v4000>("cuCtxSetCurrent", 4000);
    const CUresult rc = set != nullptr ? set(context) : CUDA_ERROR_NOT_INITIALIZED;
    current_known = false;
    return rc;
}

// Entries that may change which context is current or whether it is alive:
// forwarded, then the cache is dropped.
CUresult CUDAAPI null_primary_release_v2(CUdevice device) {
    static const auto release = backing_entry<PFN_cuDevicePrimaryCtxRelease_v11000>("cuDevicePrimaryCtxRelease", 11000);
    current_known = false;
    return release != nullptr ? release(device) : CUDA_ERROR_NOT_INITIALIZED;
}
CUresult CUDAAPI null_primary_release_v1(CUdevice device) {
    static const auto release = backing_entry<PFN_cuDevicePrimaryCtxRelease_v11000>("cuDevicePrimaryCtxRelease", 7000);
    current_known = false;
    return release != nullptr ? release(device) : CUDA_ERROR_NOT_INITIALIZED;
}
CUresult CUDAAPI null_primary_reset(CUdevice device) {
    static const auto reset = backing_entry<PFN_cuDevicePrimaryCtxReset_v11000>("cuDevicePrimaryCtxReset", 11000);
    current_known = false;
    return reset != nullptr ? reset(device) : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult CUDAAPI null_primary_get_state(CUdevice, unsigned int* flags, int* active) {
    count(kPrimaryCtxGetState);
    if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *flags = 0;
    *active = 1;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI null_ctx_synchronize() {
    count(kCtxSynchronize);
    return CUDA_SUCCESS;
}

// ---- allocation ----------------------------------------------------------------------------

CUresult CUDAAPI null_mem_alloc(CUdeviceptr* pointer, std::size_t bytes) {
    count(kMemAlloc);
    if (pointer == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    *pointer = hand_out(bytes);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI null_mem_free(CUdeviceptr pointer) {
    count(kMemFree);
    return pointer == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
CUresult CUDAAPI null_mem_alloc_async(CUdeviceptr* pointer, std::size_t bytes, CUstream) {
    count(kMemAllocAsync);
    if (pointer == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    *pointer = hand_out(bytes);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI null_mem_alloc_from_pool_async(CUdeviceptr* pointer, std::size_t bytes, CUmemoryPool pool, CUstream) {
    count(kMemAllocFromPoolAsync);
    if (pointer == nullptr || bytes == 0 || pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pointer = hand_out(bytes);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI null_mem_free_async(CUdeviceptr pointer, CUstream) {
    count(kMemFreeAsync);
    return pointer == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

// ---- IPC -------------------------------------------------------------------------------------

CUresult CUDAAPI null_ipc_get_mem_handle(CUipcMemHandle* handle, CUdeviceptr pointer) {
    count(kIpcGetMemHandle);
    if (handle == nullptr || pointer == 0) return CUDA_ERROR_INVALID_VALUE;
    std::memset(handle, 0, sizeof *handle);
    std::memcpy(handle->reserved, &pointer, sizeof pointer);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI null_mem_get_address_range(CUdeviceptr* base, std::size_t* size, CUdeviceptr pointer) {
    count(kMemGetAddressRange);
    const std::uint64_t slot = (pointer >> kSlotShift) % kSlots;
    const CUdeviceptr start = static_cast<CUdeviceptr>(pointer >> kSlotShift << kSlotShift);
    const std::uint64_t bytes = slot_bytes[slot].load(std::memory_order_relaxed);
    if (pointer == 0 || bytes == 0 || pointer - start >= bytes) return CUDA_ERROR_NOT_FOUND;
    if (base != nullptr) *base = start;
    if (size != nullptr) *size = bytes;
    return CUDA_SUCCESS;
}

// ---- VMM -------------------------------------------------------------------------------------

std::atomic<unsigned long long> next_handle{1};

CUresult CUDAAPI null_mem_address_reserve(CUdeviceptr* pointer, std::size_t bytes, std::size_t, CUdeviceptr,
                                          unsigned long long) {
    count(kMemAddressReserve);
    if (pointer == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    *pointer = hand_out(bytes);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI null_mem_address_free(CUdeviceptr pointer, std::size_t) {
    count(kMemAddressFree);
    return pointer == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
CUresult CUDAAPI null_mem_create(CUmemGenericAllocationHandle* handle, std::size_t bytes, const CUmemAllocationProp* prop,
                                 unsigned long long) {
    count(kMemCreate);
    if (handle == nullptr || bytes == 0 || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *handle = next_handle.fetch_add(1, std::memory_order_relaxed);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI null_mem_release(CUmemGenericAllocationHandle handle) {
    count(kMemRelease);
    return handle == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
CUresult CUDAAPI null_mem_map(CUdeviceptr pointer, std::size_t bytes, std::size_t, CUmemGenericAllocationHandle handle,
                              unsigned long long) {
    count(kMemMap);
    return pointer == 0 || bytes == 0 || handle == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
CUresult CUDAAPI null_mem_unmap(CUdeviceptr pointer, std::size_t bytes) {
    count(kMemUnmap);
    return pointer == 0 || bytes == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
CUresult CUDAAPI null_mem_set_access(CUdeviceptr pointer, std::size_t bytes, const CUmemAccessDesc* grants,
                                     std::size_t count_of) {
    count(kMemSetAccess);
    return pointer == 0 || bytes == 0 || grants == nullptr || count_of == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
CUresult CUDAAPI null_mem_get_access(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr pointer) {
    count(kMemGetAccess);
    if (flags == nullptr || location == nullptr || pointer == 0) return CUDA_ERROR_INVALID_VALUE;
    *flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI null_mem_get_allocation_granularity(std::size_t* granularity, const CUmemAllocationProp* prop,
                                                     CUmemAllocationGranularity_flags) {
    count(kMemGetAllocationGranularity);
    if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *granularity = std::size_t{2} << 20;
    return CUDA_SUCCESS;
}

// ---- the names answered here -----------------------------------------------------------------

struct NullEntry {
    const char* name;
    int version;  // the ABI answered; a request below it goes to the backing driver
    void* function;
};

#define NULL_ENTRY(name, version, function) {name, version, reinterpret_cast<void*>(&function)}
const NullEntry null_entries[] = {
    NULL_ENTRY("cuCtxGetCurrent", 4000, null_ctx_get_current),
    NULL_ENTRY("cuCtxSetCurrent", 4000, null_ctx_set_current),
    NULL_ENTRY("cuCtxSynchronize", 2000, null_ctx_synchronize),
    NULL_ENTRY("cuDevicePrimaryCtxRelease", 11000, null_primary_release_v2),
    NULL_ENTRY("cuDevicePrimaryCtxRelease", 7000, null_primary_release_v1),
    NULL_ENTRY("cuDevicePrimaryCtxReset", 11000, null_primary_reset),
    NULL_ENTRY("cuDevicePrimaryCtxGetState", 7000, null_primary_get_state),
    NULL_ENTRY("cuMemAlloc", 3020, null_mem_alloc),
    NULL_ENTRY("cuMemFree", 3020, null_mem_free),
    NULL_ENTRY("cuMemAllocAsync", 11020, null_mem_alloc_async),
    NULL_ENTRY("cuMemAllocFromPoolAsync", 11020, null_mem_alloc_from_pool_async),
    NULL_ENTRY("cuMemFreeAsync", 11020, null_mem_free_async),
    NULL_ENTRY("cuIpcGetMemHandle", 4010, null_ipc_get_mem_handle),
    NULL_ENTRY("cuMemGetAddressRange", 3020, null_mem_get_address_range),
    NULL_ENTRY("cuMemAddressReserve", 10020, null_mem_address_reserve),
    NULL_ENTRY("cuMemAddressFree", 10020, null_mem_address_free),
    NULL_ENTRY("cuMemCreate", 10020, null_mem_create),
    NULL_ENTRY("cuMemRelease", 10020, null_mem_release),
    NULL_ENTRY("cuMemMap", 10020, null_mem_map),
    NULL_ENTRY("cuMemUnmap", 10020, null_mem_unmap),
    NULL_ENTRY("cuMemSetAccess", 10020, null_mem_set_access),
    NULL_ENTRY("cuMemGetAccess", 10020, null_mem_get_access),
    NULL_ENTRY("cuMemGetAllocationGranularity", 10020, null_mem_get_allocation_granularity),
};
#undef NULL_ENTRY

// The highest ABI answered here that `version` may have, or null.
void* null_entry(const char* name, int version) {
    void* best = nullptr;
    int best_version = 0;
    for (const NullEntry& entry : null_entries)
        if (std::strcmp(entry.name, name) == 0 && entry.version <= version && entry.version > best_version) {
            best = entry.function;
            best_version = entry.version;
        }
    return best;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult CUDAAPI cuInit(unsigned int flags) {
    static const auto init = backing_symbol<PFN_cuInit_v2000>("cuInit");
    return init != nullptr ? init(flags) : CUDA_ERROR_NOT_INITIALIZED;
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuDriverGetVersion(int* version) {
    static const auto get = backing_symbol<PFN_cuDriverGetVersion_v2020>("cuDriverGetVersion");
    return get != nullptr ? get(version) : CUDA_ERROR_NOT_INITIALIZED;
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** function,
                                                                           int version, cuuint64_t flags,
                                                                           CUdriverProcAddressQueryResult* status) {
    if (symbol != nullptr && function != nullptr) {
        if (void* answered = null_entry(symbol, version)) {
            *function = answered;
            if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    }
    static const auto proc = backing_symbol<PFN_cuGetProcAddress_v12000>("cuGetProcAddress_v2");
    return proc != nullptr ? proc(symbol, function, version, flags, status) : CUDA_ERROR_NOT_INITIALIZED;
}

// The calls each answered entry has taken since the process started:
// names[i] has counts[i]; returns how many entries there are.
__attribute__((visibility("default"))) int cudyn_null_driver_calls(const char* const** names,
                                                                  const std::uint64_t** counts) {
    static std::uint64_t snapshot[kCountedEntries];
    for (int i = 0; i < kCountedEntries; ++i) snapshot[i] = calls[i].load(std::memory_order_relaxed);
    if (names != nullptr) *names = counted_names;
    if (counts != nullptr) *counts = snapshot;
    return kCountedEntries;
}

}  // extern "C"
