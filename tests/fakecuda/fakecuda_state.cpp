// fakecuda_state.cpp — the emulation state, the entry prologue (counting,
// stub answers, fault injection, init check), the load-time constructor that
// reads the environment, and the shared helpers of fake_state.hpp.
#include "fake_state.hpp"

#include <chrono>
#include <thread>

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#else
#include <sys/mman.h>
#include <unistd.h>
#endif

#include <cctype>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__)
#define FAKECUDA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FAKECUDA_ASAN 1
#endif
#endif
#if defined(FAKECUDA_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace fake {

namespace {

// Attribute defaults: a Hopper-class device (compute capability 9.0), with
// the answers the cudyn tests rely on spelled out.
void default_attributes(Device& d, int ordinal) {
    auto set = [&d](CUdevice_attribute a, int v) { d.attr[static_cast<std::size_t>(a)] = v; };
    set(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024);
    set(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024);
    set(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024);
    set(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64);
    set(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647);
    set(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535);
    set(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535);
    set(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152);
    set(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, 65536);
    set(CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32);
    set(CU_DEVICE_ATTRIBUTE_MAX_PITCH, 2147483647);
    set(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536);
    set(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1980000);
    set(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, 512);
    set(CU_DEVICE_ATTRIBUTE_GPU_OVERLAP, 1);
    set(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132);
    set(CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT, 0);
    set(CU_DEVICE_ATTRIBUTE_INTEGRATED, 0);
    set(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1);
    set(CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, CU_COMPUTEMODE_DEFAULT);
    set(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH, 131072);
    set(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH, 131072);
    set(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT, 65536);
    set(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH, 16384);
    set(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT, 16384);
    set(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH, 16384);
    set(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH, 32768);
    set(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT, 32768);
    set(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS, 2048);
    set(CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT, 512);
    set(CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1);
    set(CU_DEVICE_ATTRIBUTE_ECC_ENABLED, 1);
    set(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0x18 + 0x10 * ordinal);
    set(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 0);
    set(CU_DEVICE_ATTRIBUTE_TCC_DRIVER, 0);
    set(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 2619000);
    set(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 5120);
    set(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 52428800);
    set(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048);
    set(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 3);
    set(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1);
    set(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH, 32768);
    set(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS, 2048);
    set(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 0);
    set(CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, 32);
    set(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9);
    set(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0);
    set(CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233472);
    set(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 65536);
    set(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1);
    set(CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD, 0);
    set(CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID, ordinal);
    set(CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, 0);
    set(CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO, 2);
    set(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, 0);
    set(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1);
    set(CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 1);
    set(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 1);
    set(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448);
    set(CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, 0);
    set(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, 0);
    set(CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST, 0);
    // VMM is emulated with memfd/mmap: Linux only (fakecuda_vmm_unsupported.cpp elsewhere).
#if defined(__linux__)
    set(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1);
#else
    set(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0);
#endif
    set(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED, 0);
    set(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED, 0);
    set(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 32);
    set(CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, 32505856);
    set(CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, 134213632);
    set(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 0);
    set(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, 1024);
    set(CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS, 1);
    set(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING, 100);
    // IPC pools share memfds (fakecuda_pool_sharing.cpp): Linux only;
    // elsewhere pools are not exportable.
#if defined(__linux__)
    // POSIX fds, and fabric handles from 12.3 (an H200 with driver 580 reads 0x9).
    set(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES,
        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | (FAKE_HAS(12030) ? CU_MEM_HANDLE_TYPE_FABRIC : 0));
#else
    set(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, CU_MEM_HANDLE_TYPE_NONE);
#endif
    set(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, 1);
    set(CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, 1);
    set(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, 1);
    // The 8.0 memory-operation ABI: deprecated, and disabled by default on
    // drivers that have the 11.7 one; a driver with only the old ABI has it on.
    set(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, FAKE_HAS(11070) ? 0 : 1);
    set(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1, FAKE_HAS(11070) ? 0 : 1);
    set(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1, FAKE_HAS(11070) ? 0 : 1);
    // dma-buf descriptors are memfds (fakecuda_dmabuf.cpp): Linux only.
#if defined(__linux__)
    set(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, 1);
#else
    set(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, 0);
#endif
    set(CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT, 4);
    set(CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS, 0);
    set(CU_DEVICE_ATTRIBUTE_NUMA_CONFIG, CU_DEVICE_NUMA_CONFIG_NONE);
    set(CU_DEVICE_ATTRIBUTE_NUMA_ID, -1);
    set(CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, 0);
    set(CU_DEVICE_ATTRIBUTE_MPS_ENABLED, 0);
    set(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 0);
    set(CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID, 0x233010de);
    set(CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID, 0x16c110de);
    set(CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1);
    set(CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED, 0);  // as on an H200 with driver 580

    // Attributes newer than the variant's driver read 0 ("not supported"):
    // CUDA 10.2 added the VMM ones (102+), CUDA 12.0 the ones from 126 on,
    // CUDA 13.0 the host-location ones from 141 on.
    std::size_t newest = CU_DEVICE_ATTRIBUTE_MAX;
    if (FAKECUDA_DRIVER_VERSION < 10020) {
        newest = CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED;
    } else if (FAKECUDA_DRIVER_VERSION < 12000) {
        newest = CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT;
    } else if (FAKECUDA_DRIVER_VERSION < 13000) {
        newest = CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED;
    }
    for (std::size_t i = newest; i < d.attr.size(); ++i) d.attr[i] = 0;
}

void apply_attribute_overrides(State& st, const char* spec) {
    // "id:value,id:value@device": every device, or only the one after '@'.
    const char* p = spec;
    while (*p) {
        while (*p == ',' || *p == ' ' || *p == ';') ++p;
        if (!*p) break;
        char* end = nullptr;
        long id = std::strtol(p, &end, 0);
        if (end == p || *end != ':') {
            std::fprintf(stderr, "fakecuda: FAKECUDA_ATTR: cannot parse '%s'\n", p);
            return;
        }
        p = end + 1;
        long value = std::strtol(p, &end, 0);
        if (end == p) {
            std::fprintf(stderr, "fakecuda: FAKECUDA_ATTR: missing value near '%s'\n", p);
            return;
        }
        if (value < INT_MIN || value > INT_MAX) {
            std::fprintf(stderr, "fakecuda: FAKECUDA_ATTR: value %ld of attribute %ld does not fit an int\n", value,
                         id);
            return;
        }
        p = end;
        long only = -1;
        if (*p == '@') {
            only = std::strtol(p + 1, &end, 0);
            if (end == p + 1 || only < 0 || only >= st.device_count) {
                std::fprintf(stderr, "fakecuda: FAKECUDA_ATTR: bad device near '%s' (devices 0..%d)\n", p,
                             st.device_count - 1);
                return;
            }
            p = end;
        }
        if (id <= 0 || id >= CU_DEVICE_ATTRIBUTE_MAX) {
            std::fprintf(stderr, "fakecuda: FAKECUDA_ATTR: attribute %ld out of range\n", id);
            continue;
        }
        for (std::size_t i = 0; i < st.devices.size(); ++i)
            if (only < 0 || static_cast<std::size_t>(only) == i) st.devices[i].attr[static_cast<std::size_t>(id)] = static_cast<int>(value);
    }
}

int env_int(const char* name, int fallback, int lo, int hi) {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    char* end = nullptr;
    long n = std::strtol(v, &end, 0);
    if (end == v || *end != '\0') {
        std::fprintf(stderr, "fakecuda: %s='%s' is not a number; using %d\n", name, v, fallback);
        return fallback;
    }
    if (n < lo || n > hi) {
        const long used = n < lo ? lo : hi;
        std::fprintf(stderr, "fakecuda: %s='%s' is outside %d..%d; using %ld\n", name, v, lo, hi, used);
        n = used;
    }
    return static_cast<int>(n);
}

}  // namespace

State& state() {
    // Never destroyed: calls made while the process exits still find it.
    static State* s = [] {
        auto* st = new State();
        for (int i = 0; i < kMaxDevices; ++i) {
            st->devices[static_cast<std::size_t>(i)].primary.device = i;
            default_attributes(st->devices[static_cast<std::size_t>(i)], i);
            for (int j = 0; j < kMaxDevices; ++j) st->peer[i][j] = (i != j) ? 1 : 0;
        }
        return st;
    }();
    return *s;
}

CUctx_st*& tls_current() {
    static thread_local CUctx_st* current = nullptr;
    return current;
}

// ---- prologue ------------------------------------------------------------------

std::string base_name(const std::string& symbol) {
    std::string s = symbol;
    for (const char* suffix : {"_ptsz", "_ptds"}) {
        const std::size_t n = std::strlen(suffix);
        if (s.size() > n && s.compare(s.size() - n, n, suffix) == 0) {
            s.resize(s.size() - n);
            break;
        }
    }
    std::size_t i = s.size();
    while (i > 0 && std::isdigit(static_cast<unsigned char>(s[i - 1]))) --i;
    if (i < s.size() && i >= 2 && s[i - 1] == 'v' && s[i - 2] == '_') s.resize(i - 2);
    return s;
}

namespace {
thread_local Call* t_current_call = nullptr;
}  // namespace

Call& Call::current() { return *t_current_call; }

Call::~Call() { t_current_call = outer_; }

Call::Call(const char* symbol, unsigned needs) : lock_(state().mu), symbol_(symbol), outer_(t_current_call) {
    t_current_call = this;
    State& st = state();
    ++st.calls[symbol];
    if (st.recording_calls) st.call_record.emplace_back(symbol);
    if (st.deinitialized) {
        done_ = true;
        rc_ = CUDA_ERROR_DEINITIALIZED;
        return;
    }
    if (FAKECUDA_IS_STUB) {
        done_ = true;
        rc_ = CUDA_ERROR_STUB_LIBRARY;
        return;
    }
    if (!st.faults.empty()) {
        const std::string sym(symbol);
        const std::string base = base_name(sym);
        for (auto& rule : st.faults) {
            if (rule.name != sym && rule.name != base) continue;
            const long n = ++rule.seen[sym];
            if (n == rule.nth || (rule.and_after && n > rule.nth)) {
                if (rule.slow_ms != 0) {
                    // Late, not failed: the lock is let go meanwhile, as a
                    // real driver call blocks without stopping other threads.
                    lock_.unlock();
                    std::this_thread::sleep_for(std::chrono::milliseconds(rule.slow_ms));
                    lock_.lock();
                    break;  // the rules may have changed meanwhile: stop reading them
                }
                done_ = true;
                rc_ = rule.code;
                return;
            }
        }
    }
    if ((needs & kNeedsInit) && !st.initialized) {
        done_ = true;
        rc_ = CUDA_ERROR_NOT_INITIALIZED;
        return;
    }
    // A context that faulted answers its error to everything that uses it.
    if ((needs & kNeedsInit) && (needs & kDeviceLevel) != kDeviceLevel) {
        if (CUctx_st* ctx = current_context(st); ctx && ctx->sticky != CUDA_SUCCESS) {
            done_ = true;
            rc_ = ctx->sticky;
        }
    }
}

namespace {
// Whether `name` (exported symbol or base name) is an entry of this variant.
bool known_entry(const std::string& name) {
    const std::string base = base_name(name);
    std::size_t count = 0;
    const ProcEntry* entries = proc_entries(&count);
    for (std::size_t i = 0; i < count; ++i)
        if (base == entries[i].base) return true;
    return false;
}
}  // namespace

void set_fail_spec(State& st, const char* spec) {
    st.faults.clear();
    if (!spec) return;
    std::string all(spec);
    std::size_t pos = 0;
    while (pos <= all.size()) {
        std::size_t comma = all.find_first_of(",;", pos);
        if (comma == std::string::npos) comma = all.size();
        std::string item = all.substr(pos, comma - pos);
        pos = comma + 1;
        // trim
        while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.erase(0, 1);
        while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.pop_back();
        if (item.empty()) continue;

        FaultRule rule;
        std::size_t c1 = item.find(':');
        rule.name = item.substr(0, c1);
        bool ok = !rule.name.empty();
        if (ok && c1 != std::string::npos) {
            std::size_t c2 = item.find(':', c1 + 1);
            std::string nth = item.substr(c1 + 1, c2 == std::string::npos ? std::string::npos : c2 - c1 - 1);
            if (!nth.empty() && nth.back() == '+') {
                rule.and_after = true;
                nth.pop_back();
            }
            char* end = nullptr;
            long n = std::strtol(nth.c_str(), &end, 10);
            if (nth.empty() || *end != '\0' || n < 1) ok = false;
            rule.nth = n;
            if (ok && c2 != std::string::npos) {
                std::string code = item.substr(c2 + 1);
                long v = std::strtol(code.c_str(), &end, 0);
                if (code.rfind("SLOW=", 0) == 0) {
                    // At most ten minutes: a longer delay is a typo, not a test.
                    const long ms = std::strtol(code.c_str() + 5, &end, 10);
                    ok = ms > 0 && ms <= 600'000 && *end == '\0';
                    rule.slow_ms = static_cast<unsigned>(ms);
                } else if (!code.empty() && *end == '\0') {
                    rule.code = static_cast<CUresult>(v);
                } else {
                    bool known = false;
                    rule.code = error_from_name(code, &known);
                    ok = known;
                }
            }
        }
        if (!ok) {
            std::fprintf(stderr,
                         "fakecuda: fault rule '%s' ignored (want NAME[:N[+][:CODE|:SLOW=MS]]: N a call number "
                         "from 1, CODE a CUresult number or CUDA_ERROR_* name, MS 1..600000)\n",
                         item.c_str());
            continue;
        }
        if (!known_entry(rule.name)) {
            // Kept (a rule may be shared by variants of different driver
            // versions), but said: a typo would otherwise never fire, silently.
            std::fprintf(stderr, "fakecuda: fault rule '%s': this fake (%s) has no entry point named %s; "
                         "the rule never fires\n", item.c_str(), FAKECUDA_VARIANT_NAME, rule.name.c_str());
        }
        st.faults.push_back(std::move(rule));
    }
}

// ---- devices, contexts, streams ------------------------------------------------------

bool valid_device(const State& st, int dev) { return dev >= 0 && dev < st.device_count; }

int attribute(const State& st, int dev, CUdevice_attribute a) {
    return st.devices[static_cast<std::size_t>(dev)].attr[static_cast<std::size_t>(a)];
}

CUctx_st* current_context(State& st) {
    CUctx_st* c = tls_current();
    if (!c || !known_context(st, c) || c->refcount <= 0) return nullptr;
    return c;
}

bool known_context(const State& st, CUctx_st* h) {
    for (int i = 0; i < st.device_count; ++i) {
        if (h == &st.devices[static_cast<std::size_t>(i)].primary) return true;
    }
    return false;
}

bool is_default_stream(CUstream s) {
    return s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

CUresult check_stream(State& st, CUstream s, CUctx_st** ctx_out, bool) {
    CUctx_st* ctx = nullptr;
    if (is_default_stream(s)) {
        ctx = current_context(st);
        if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    } else {
        if (st.streams.count(s) == 0) return CUDA_ERROR_INVALID_HANDLE;
        ctx = s->ctx;
    }
    if (ctx->sticky != CUDA_SUCCESS) return ctx->sticky;
    if (ctx_out) *ctx_out = ctx;
    return CUDA_SUCCESS;
}

// ---- allocations ---------------------------------------------------------------------

Allocation* find_allocation(State& st, std::uintptr_t p, std::size_t n) {
    auto it = st.allocs.upper_bound(p);
    if (it == st.allocs.begin()) return nullptr;
    --it;
    Allocation& a = it->second;
    if (p < a.base || p - a.base >= a.size) return nullptr;
    if (n > a.size - (p - a.base)) return nullptr;
    return &a;
}

Allocation* find_alias(State& st, std::uintptr_t p, std::size_t* offset) {
    auto it = st.aliases.upper_bound(p);
    if (it == st.aliases.begin()) return nullptr;
    --it;
    auto host = st.allocs.find(it->second);
    if (host == st.allocs.end()) return nullptr;
    Allocation& a = host->second;
    if (p < a.alias || p - a.alias >= a.size) return nullptr;
    if (offset) *offset = p - a.alias;
    return &a;
}

void* resolve_device(State& st, std::uintptr_t p, std::size_t n, Allocation** which) {
    std::size_t off = 0;
    if (Allocation* a = find_alias(st, p, &off)) {
        if (n > a->size - off) return nullptr;
        if (which) *which = a;
        return reinterpret_cast<void*>(a->base + off);
    }
    // VMM mappings: copies may span several contiguous ones.
    if (const int vmm = vmm_check(st, p, n); vmm != 0) {
        if (vmm < 0) return nullptr;
        if (which) *which = find_allocation(st, p, 0);
        return reinterpret_cast<void*>(p);
    }
    Allocation* a = find_allocation(st, p, n);
    if (!a) return nullptr;
    // Registered memory with a separate device alias is not reachable from
    // the device through its host address.
    if (a->kind == Kind::Registered && a->alias != 0) return nullptr;
    if (which) *which = a;
    return reinterpret_cast<void*>(p);
}

void* map_memory(std::size_t size, std::size_t* mapping_size, int fd) {
    const std::size_t page = kPageSize;
    if (size > (~std::size_t{0}) - page) return nullptr;
    const std::size_t len = (size + page - 1) / page * page;
#if defined(_WIN32)
    (void)fd;
    void* m = ::VirtualAlloc(nullptr, len, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
    if (m == nullptr) return nullptr;
#else
    void* m = fd >= 0 ? ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0)
                      : ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return nullptr;
#endif
#if defined(FAKECUDA_ASAN)
    // Catch reads/writes past the requested size (but inside the page).
    ASAN_POISON_MEMORY_REGION(static_cast<char*>(m) + size, len - size);
#endif
    *mapping_size = len;
    return m;
}

void unmap_memory(void* mapping, std::size_t mapping_size) {
    if (!mapping) return;
#if defined(FAKECUDA_ASAN)
    // The shadow outlives the mapping; leave none behind for the next one.
    ASAN_UNPOISON_MEMORY_REGION(mapping, mapping_size);
#endif
#if defined(_WIN32)
    (void)mapping_size;
    ::VirtualFree(mapping, 0, MEM_RELEASE);
#else
    ::munmap(mapping, mapping_size);
#endif
}

void* reserve_inaccessible(std::size_t size) {
#if defined(_WIN32)
    return ::VirtualAlloc(nullptr, size, MEM_RESERVE, PAGE_NOACCESS);
#else
    void* m = ::mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return m == MAP_FAILED ? nullptr : m;
#endif
}

void release_reservation(void* reservation, std::size_t size) {
#if defined(_WIN32)
    (void)size;
    ::VirtualFree(reservation, 0, MEM_RELEASE);
#else
    ::munmap(reservation, size);
#endif
}

void destroy_allocation(State& st, std::map<std::uintptr_t, Allocation>::iterator it) {
    release_allocation(st, it->second);
    st.allocs.erase(it);
}

void release_allocation(State& st, Allocation& a) {
    if (a.kind == Kind::Device) {
        auto& d = st.devices[static_cast<std::size_t>(a.device)];
        d.bytes_in_use -= (a.size <= d.bytes_in_use) ? a.size : d.bytes_in_use;
    }
    if (a.alias != 0) {
        st.aliases.erase(a.alias);
        if (a.alias_mapping) release_reservation(a.alias_mapping, a.size);
    }
    unmap_memory(a.mapping, a.mapping_size);
#if !defined(_WIN32)
    if (a.shared_fd >= 0) ::close(a.shared_fd);
#endif
    a.mapping = nullptr;
    a.alias_mapping = nullptr;
    a.shared_fd = -1;
}

void destroy_context_resources(State& st, CUctx_st* ctx) {
    // The caller waited for the context's work (primary_release); what a
    // failed context left pending is dropped.
    drop_context_queues(st, ctx);
    peer_context_destroyed(st, ctx);
    ctx->sticky = CUDA_SUCCESS;
    for (auto it = st.allocs.begin(); it != st.allocs.end();) {
        auto next = std::next(it);
        if (it->second.ctx == ctx && it->second.kind != Kind::VmmMapped) destroy_allocation(st, it);
        it = next;
    }
    // Pool blocks belong to no context and stay; frees pending on the
    // context's dropped streams are done now.
    pools_context_destroyed(st);
    for (auto it = st.streams.begin(); it != st.streams.end();) {
        if ((*it)->ctx == ctx) {
            delete *it;
            it = st.streams.erase(it);
        } else {
            ++it;
        }
    }
    for (auto it = st.events.begin(); it != st.events.end();) {
        if ((*it)->ctx == ctx) {
            delete *it;
            it = st.events.erase(it);
        } else {
            ++it;
        }
    }
}

// ---- locations and logs ------------------------------------------------------------

CUresult check_location(const State& st, const CUmemLocation& loc, bool for_prefetch) {
    switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        if (!valid_device(st, loc.id)) return CUDA_ERROR_INVALID_DEVICE;
        if (for_prefetch && attribute(st, loc.id, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) == 0)
            return CUDA_ERROR_INVALID_DEVICE;
        return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        if (loc.id < 0 || loc.id >= st.numa_nodes) return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

Loc normalize_location(const CUmemLocation& loc) {
    switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE: return Loc{CU_MEM_LOCATION_TYPE_DEVICE, loc.id};
    case CU_MEM_LOCATION_TYPE_HOST: return Loc{CU_MEM_LOCATION_TYPE_HOST, CU_DEVICE_CPU};
    case CU_MEM_LOCATION_TYPE_HOST_NUMA: return Loc{CU_MEM_LOCATION_TYPE_HOST_NUMA, loc.id};
    // The calling thread's node: the emulated host has its threads on node 0.
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: return Loc{CU_MEM_LOCATION_TYPE_HOST_NUMA, 0};
    default: return Loc{};
    }
}

void log_record(std::vector<fakecuda_record>& log, const char* entry, std::uintptr_t ptr,
                std::size_t size, int advice, int type, int id, CUstream stream,
                unsigned long long flags, long seq) {
    fakecuda_record r{};
    std::snprintf(r.entry, sizeof r.entry, "%s", entry);
    r.ptr = ptr;
    r.size = size;
    r.advice = advice;
    r.location_type = type;
    r.location_id = id;
    r.stream = static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(stream));
    r.flags = flags;
    r.call_seq = seq;
    log.push_back(r);
}

}  // namespace fake

// ---- load and unload ---------------------------------------------------------------

namespace {

__attribute__((constructor)) void fakecuda_load() {
    fake::State& st = fake::state();
    std::lock_guard<std::mutex> lock(st.mu);
    ++st.init_count;
    st.device_count = fake::env_int("FAKECUDA_DEVICES", 1, 0, fake::kMaxDevices);
    st.numa_nodes = fake::env_int("FAKECUDA_NUMA_NODES", 1, 1, 64);
    st.imex_channel = fake::env_int("FAKECUDA_IMEX", 0, 0, 1) != 0;
    st.driver_version = fake::env_int("FAKECUDA_DRIVER_VERSION", FAKECUDA_DRIVER_VERSION, 1000, 99990);
    st.stream_delay_us = static_cast<unsigned>(fake::env_int("FAKECUDA_STREAM_DELAY_US", 0, 0, 10'000'000));
    st.stream_wait_timeout_ms =
        static_cast<unsigned>(fake::env_int("FAKECUDA_STREAM_WAIT_TIMEOUT_MS", 10000, 1, 3'600'000));
    if (const char* a = std::getenv("FAKECUDA_ATTR")) fake::apply_attribute_overrides(st, a);
    if (const char* f = std::getenv("FAKECUDA_FAIL")) fake::set_fail_spec(st, f);
    // FAKECUDA_NO_PEER="A:B,...": device A cannot reach device B (the
    // process-wide fakecuda_set_peer_access from the start, for programs
    // such as cudyn-info that a test runs whole).
    if (const char* pairs = std::getenv("FAKECUDA_NO_PEER")) {
        for (const char* p = pairs; *p != '\0';) {
            char* end = nullptr;
            const long a = std::strtol(p, &end, 10);
            char* after = end;
            const long b = (end != p && *end == ':') ? std::strtol(end + 1, &after, 10) : -1;
            if (after == end + 1 || b < 0 || a < 0 || a >= st.device_count || b >= st.device_count ||
                (*after != ',' && *after != '\0')) {
                std::fprintf(stderr, "fakecuda: FAKECUDA_NO_PEER: bad pair near '%s' (A:B, devices 0..%d); rest ignored\n",
                             p, st.device_count - 1);
                break;
            }
            st.peer[a][b] = 0;
            p = *after == ',' ? after + 1 : after;
        }
    }
}

// Runs after every C++ static destructor of the process: from here on the
// driver answers CUDA_ERROR_DEINITIALIZED, as a real one does at exit.
__attribute__((destructor)) void fakecuda_unload() {
    fake::State& st = fake::state();
    std::lock_guard<std::mutex> lock(st.mu);
    st.deinitialized = true;
}

}  // namespace
