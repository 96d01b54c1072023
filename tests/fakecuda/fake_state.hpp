// fake_state.hpp — shared internals of the fake libcuda.so.1 drivers.
//
// Every source of the fake includes this header first. It
//   * selects the variant (FAKECUDA_VARIANT_* from the build) and derives what
//     the variant exports from its driver version (FAKE_HAS(v));
//   * includes cuda.h in "driver build" mode so the old v1 ABIs are declared
//     and no name is remapped (cuMemAlloc stays cuMemAlloc);
//   * holds the one emulation state: devices, contexts, allocations, streams,
//     events, logs, counters, fault rules — all behind one mutex;
//   * provides FAKE_ENTER, the prologue every exported cu* entry starts with
//     (call counting, deinit/stub answers, fault injection, init check).
//
// Adding an entry point (e.g. the future fakecuda_vmm.cpp / fakecuda_ipc.cpp):
//   FAKE_API CUresult CUDAAPI cuMemMap(...) {
//       FAKE_ENTER(fake::kNeedsInit);
//       ... work on fake::state() (the lock is held until return) ...
//   }
// and list it in fakecuda_registry.cpp so cuGetProcAddress finds it.
// VMM mappings should be put into State::allocs with Kind::VmmMapped so copies,
// memsets and pointer queries see them; count VMM objects in vmm_objects.
#ifndef CUDYN_TESTS_FAKECUDA_FAKE_STATE_HPP
#define CUDYN_TESTS_FAKECUDA_FAKE_STATE_HPP

// ---- variant selection ------------------------------------------------------
#if defined(FAKECUDA_VARIANT_EMULATED)
#define FAKECUDA_VARIANT_NAME "emulated"
#define FAKECUDA_DRIVER_VERSION 13000
#elif defined(FAKECUDA_VARIANT_CUDA11)
#define FAKECUDA_VARIANT_NAME "cuda11"
#define FAKECUDA_DRIVER_VERSION 11080
#elif defined(FAKECUDA_VARIANT_LEGACY)
#define FAKECUDA_VARIANT_NAME "legacy"
#define FAKECUDA_DRIVER_VERSION 10010
#elif defined(FAKECUDA_VARIANT_STUB)
#define FAKECUDA_VARIANT_NAME "stub"
#define FAKECUDA_DRIVER_VERSION 13000
#define FAKECUDA_IS_STUB 1
#elif defined(FAKECUDA_VARIANT_BROKEN)
#define FAKECUDA_VARIANT_NAME "broken"
#define FAKECUDA_DRIVER_VERSION 13000
#define FAKECUDA_IS_BROKEN 1
#else
#error "define one of FAKECUDA_VARIANT_{EMULATED,CUDA11,LEGACY,STUB,BROKEN}"
#endif

#ifndef FAKECUDA_IS_STUB
#define FAKECUDA_IS_STUB 0
#endif
#ifndef FAKECUDA_IS_BROKEN
#define FAKECUDA_IS_BROKEN 0
#endif

// An entry point whose ABI first shipped with CUDA version v is compiled (and
// so exported) only where the variant's driver is at least that new. This is
// what keeps e.g. cuMemAdvise_v2 out of the cuda11 and legacy symbol tables.
#define FAKE_HAS(v) (FAKECUDA_DRIVER_VERSION >= (v))

// ---- CUDA headers -----------------------------------------------------------
// Driver-build mode: no #define remapping, v1 ABIs declared, and the
// per-thread (_ptds/_ptsz) forms declared too.
#define __CUDA_API_VERSION_INTERNAL 1
#define FAKECUDA_BUILDING 1
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif
#include <cuda.h>
#include "fakecuda_probe.h"
#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

// Exported entry points: C linkage, default visibility. Everything else in the
// library is hidden (-fvisibility=hidden plus the fakecuda.map version script).
// On Windows the DLL exports exactly what is marked dllexport.
#if defined(_WIN32)
#define FAKE_API extern "C" __declspec(dllexport)
#else
#define FAKE_API extern "C" __attribute__((visibility("default")))
#endif

// ---- opaque handle types (cuda.h only forward-declares these) ---------------
struct CUctx_st {
    int device = 0;
    int refcount = 0;        // primary-context retain count; active while > 0
    unsigned int flags = 0;
};

struct CUstream_st {
    CUctx_st* ctx = nullptr;
    unsigned int flags = 0;
};

namespace fake {
struct SharedEvent;  // fakecuda_ipc.cpp
}  // namespace fake

struct CUevent_st {
    CUctx_st* ctx = nullptr;
    unsigned int flags = 0;
    bool recorded = false;
    std::chrono::steady_clock::time_point when{};
    // Interprocess events (fakecuda_ipc.cpp): the state shared with other
    // processes, and whether this event was opened from another process's handle.
    fake::SharedEvent* ipc = nullptr;
    bool imported = false;
    CUevent_st() = default;
    CUevent_st(const CUevent_st&) = delete;
    CUevent_st& operator=(const CUevent_st&) = delete;
    ~CUevent_st();  // releases the shared state (fakecuda_ipc.cpp); called with the lock held
};

namespace fake {

constexpr int kMaxDevices = 8;
constexpr unsigned long long kTotalMemory = 80ULL << 30;  // reported, never allocated
constexpr std::size_t kPageSize = 4096;                   // managed-memory state granularity
constexpr std::size_t kDeviceAlignment = 256;

enum class Kind {
    Device,      // cuMemAlloc
    Host,        // cuMemHostAlloc
    Managed,     // cuMemAllocManaged
    Registered,  // cuMemHostRegister (memory owned by the caller)
    VmmMapped,   // reserved for the VMM emulation: a mapped piece of a reserved range
    IpcOpened,   // cuIpcOpenMemHandle: another process's cuMemAlloc memory mapped here
};

// A location as the managed-memory state stores it.
struct Loc {
    int type = CU_MEM_LOCATION_TYPE_INVALID;
    int id = CU_DEVICE_INVALID;
    bool operator==(const Loc& o) const { return type == o.type && id == o.id; }
    bool operator!=(const Loc& o) const { return !(*this == o); }
};

// Managed-memory state of one run of pages.
struct PageState {
    bool read_mostly = false;
    Loc preferred{};
    std::uint32_t accessed_by = 0;  // bit d: device d; kHostBit: the host
    Loc last_prefetch{};
    static constexpr std::uint32_t kHostBit = 1u << 31;
};

struct Allocation {
    std::uintptr_t base = 0;
    std::size_t size = 0;
    Kind kind = Kind::Device;
    int device = 0;
    CUctx_st* ctx = nullptr;
    unsigned int flags = 0;           // cuMemHostAlloc / cuMemHostRegister / cuMemAllocManaged flags
    void* mapping = nullptr;          // what to munmap (null: caller-owned memory)
    std::size_t mapping_size = 0;
    std::uintptr_t alias = 0;         // registered memory: separate device address (0: same as host)
    void* alias_mapping = nullptr;
    unsigned long long buffer_id = 0;
    int shared_fd = -1;               // cuMemAlloc memory: the memfd behind it, named by IPC handles (closed with it)
    // VMM (future): the reserved range this mapping lies in, for
    // CU_POINTER_ATTRIBUTE_RANGE_START_ADDR/_SIZE; 0 = the allocation itself.
    std::uintptr_t range_base = 0;
    std::size_t range_size = 0;
    unsigned long long allowed_handle_types = 0;
    // Managed memory: page-run start offset -> state (piecewise constant).
    std::map<std::size_t, PageState> pages;
};

struct Device {
    std::array<int, CU_DEVICE_ATTRIBUTE_MAX> attr{};
    CUctx_st primary{};
    unsigned long long bytes_in_use = 0;  // cuMemAlloc (and later VMM physical) bytes
};

struct FaultRule {
    std::string name;
    long nth = 1;
    bool and_after = false;
    CUresult code = CUDA_ERROR_OUT_OF_MEMORY;
    std::map<std::string, long> seen;  // per exported symbol
};

struct ProcRequest {
    std::string entry;
    std::string symbol;
    int version = 0;
    unsigned long long flags = 0;
    int result = 0;
    int status = -1;
};

struct State {
    std::mutex mu;

    int init_count = 0;
    bool initialized = false;
    bool deinitialized = false;
    int driver_version = FAKECUDA_DRIVER_VERSION;
    int device_count = 1;
    int numa_nodes = 1;
    std::array<Device, kMaxDevices> devices{};
    int peer[kMaxDevices][kMaxDevices] = {};

    std::map<std::uintptr_t, Allocation> allocs;        // keyed by base; ranges never overlap
    std::map<std::uintptr_t, std::uintptr_t> aliases;   // registered alias base -> host base
    unsigned long long next_buffer_id = 1;
    long vmm_objects = 0;   // maintained by the VMM emulation
    long ipc_objects = 0;   // maintained by the IPC emulation

    std::set<CUstream_st*> streams;
    std::set<CUevent_st*> events;

    std::map<std::string, long> calls;
    std::vector<FaultRule> faults;

    std::deque<ProcRequest> proc_requests;
    std::vector<fakecuda_record> advice_log;
    std::vector<fakecuda_record> prefetch_log;
    long call_seq = 0;
};

// The process-wide state. Created on first use, never destroyed (so a call
// made during static destruction still finds it).
State& state();

// Current context of the calling thread (may be an inactive primary context).
CUctx_st*& tls_current();

// ---- the entry prologue ------------------------------------------------------
enum EntryNeeds : unsigned { kNoInit = 0, kNeedsInit = 1 };

class Call {
public:
    Call(const char* symbol, unsigned needs);
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;
    bool done() const { return done_; }
    CUresult rc() const { return rc_; }
    const char* symbol() const { return symbol_; }

private:
    std::unique_lock<std::mutex> lock_;
    const char* symbol_;
    bool done_ = false;
    CUresult rc_ = CUDA_SUCCESS;
};

// Starts every exported cu* entry: takes the lock for the whole call, counts
// the call under the function's own (exported) name, and returns early for
// deinit / stub / injected faults / missing cuInit.
#define FAKE_ENTER(needs)                          \
    ::fake::Call fake_call_(__func__, (needs));    \
    if (fake_call_.done()) return fake_call_.rc()

// ---- helpers (lock held) -----------------------------------------------------
// Base name of an exported symbol: strips _ptsz/_ptds, then _v<digits>.
std::string base_name(const std::string& symbol);
// Parse a FAKECUDA_FAIL spec into st.faults (replacing them). Reports bad rules on stderr.
void set_fail_spec(State& st, const char* spec);
// Look up a CUresult's name/description; nullptr when the code is unknown.
const char* error_name(CUresult rc);
const char* error_string(CUresult rc);
CUresult error_from_name(const std::string& name, bool* ok);

bool valid_device(const State& st, int dev);
int attribute(const State& st, int dev, CUdevice_attribute a);

// The current context if it is active; nullptr otherwise.
CUctx_st* current_context(State& st);
// Is h a context handle this driver handed out?
bool known_context(const State& st, CUctx_st* h);
// Stream validation. Default-stream handles (0, CU_STREAM_LEGACY,
// CU_STREAM_PER_THREAD) resolve to the current context (INVALID_CONTEXT when
// none); other handles must be live streams (INVALID_HANDLE otherwise).
CUresult check_stream(State& st, CUstream s, CUctx_st** ctx_out);
bool is_default_stream(CUstream s);

// Allocation containing [p, p+n) (n may be 0 = just p), through host
// addresses. nullptr when none.
Allocation* find_allocation(State& st, std::uintptr_t p, std::size_t n = 0);
// Allocation whose registered alias contains p; *offset gets p - alias.
Allocation* find_alias(State& st, std::uintptr_t p, std::size_t* offset);
// Resolve a device address range (any tracked kind, registered aliases
// included) to host memory. Returns nullptr when [p, p+n) is not inside one
// tracked allocation usable from the device.
void* resolve_device(State& st, std::uintptr_t p, std::size_t n, Allocation** which = nullptr);

// VMM addresses (fakecuda_vmm.cpp): 0 when p is in no reserved range, 1 when
// [p, p + n) lies in contiguous mappings that are all read-write accessible,
// -1 otherwise (unmapped, inaccessible, or running past the mapped memory).
int vmm_check(State& st, std::uintptr_t p, std::size_t n);

// Anonymous, lazily-committed mapping; nullptr on failure. Under ASan the
// bytes past `size` up to the page end are poisoned. With `fd` >= 0 the file
// is mapped MAP_SHARED instead (memory another process can map too).
void* map_memory(std::size_t size, std::size_t* mapping_size, int fd = -1);
void unmap_memory(void* mapping, std::size_t mapping_size);
// An inaccessible address range of `size` bytes (a registered range's device
// alias), or null; and its release. mmap / VirtualAlloc.
void* reserve_inaccessible(std::size_t size);
void release_reservation(void* reservation, std::size_t size);
// Drop a tracked allocation and release what it owns.
void destroy_allocation(State& st, std::map<std::uintptr_t, Allocation>::iterator it);
// Tear down everything owned by a primary context that reached refcount 0.
void destroy_context_resources(State& st, CUctx_st* ctx);

// ---- inter-process sharing (fakecuda_ipc.cpp) ----------------------------------
// A memfd of `size` bytes (rounded up to pages) that backs cuMemAlloc memory so
// cuIpcGetMemHandle can name it; -1 where the platform has none (then the
// memory is anonymous and cannot be shared).
int shareable_memory_fd(std::size_t size);
// Interprocess-event hooks of the event entries (fakecuda_core.cpp); each is a
// no-op / success for events without shared state.
CUresult ipc_event_create(CUevent_st* e);    // gives a CU_EVENT_INTERPROCESS event its shared state
void ipc_event_record(CUevent_st* e);        // a record: completes at once unless fakecuda_hold_events(1)
CUresult ipc_event_query(CUevent_st* e);     // CUDA_SUCCESS or CUDA_ERROR_NOT_READY
CUresult ipc_event_wait(CUevent_st* e);      // blocks until the last record completes (bounded)

// Validate a CUmemLocation for managed-memory calls. `for_prefetch` selects
// the prefetch rules (device needs CONCURRENT_MANAGED_ACCESS). Returns
// CUDA_SUCCESS, CUDA_ERROR_INVALID_DEVICE or CUDA_ERROR_INVALID_VALUE.
CUresult check_location(const State& st, const CUmemLocation& loc, bool for_prefetch);
// Resolve HOST_NUMA_CURRENT etc. to the form the range state stores.
Loc normalize_location(const CUmemLocation& loc);

// ---- cuGetProcAddress registry (fakecuda_registry.cpp) -------------------------
// One ABI of one base name: the function for the legacy default stream and,
// for stream-ordered entries, its per-thread-default-stream twin.
struct ProcEntry {
    const char* base;
    int version;
    void* legacy;
    void* per_thread;  // nullptr: none (the legacy function is returned)
};
const ProcEntry* proc_entries(std::size_t* count);

void log_record(std::vector<fakecuda_record>& log, const char* entry, std::uintptr_t ptr,
                std::size_t size, int advice, int type, int id, CUstream stream,
                unsigned long long flags, long seq);

}  // namespace fake

#endif  // CUDYN_TESTS_FAKECUDA_FAKE_STATE_HPP
