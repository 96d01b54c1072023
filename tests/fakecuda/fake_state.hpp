// fake_state.hpp — what every source of the fake libcuda.so.1 includes first:
// the variant and what it exports (FAKE_HAS), cuda.h in driver-build mode (v1
// ABIs declared, no name remapped), the one emulation state behind one mutex,
// and FAKE_ENTER, the prologue of every exported cu* entry. A new entry starts
// with FAKE_ENTER and gets a row in fakecuda_registry.cpp.
#ifndef CUDYN_TESTS_FAKECUDA_FAKE_STATE_HPP
#define CUDYN_TESTS_FAKECUDA_FAKE_STATE_HPP

// ---- variant selection ------------------------------------------------------
#if defined(FAKECUDA_VARIANT_EMULATED)
#define FAKECUDA_VARIANT_NAME "emulated"
#define FAKECUDA_DRIVER_VERSION 13000
#elif defined(FAKECUDA_VARIANT_CUDA11)
#define FAKECUDA_VARIANT_NAME "cuda11"
#define FAKECUDA_DRIVER_VERSION 11080
#elif defined(FAKECUDA_VARIANT_CUDA12)
#define FAKECUDA_VARIANT_NAME "cuda12"
#define FAKECUDA_DRIVER_VERSION 12080
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
#error "define one of FAKECUDA_VARIANT_{EMULATED,CUDA12,CUDA11,LEGACY,STUB,BROKEN}"
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
#include "cudyn/fake/fakecuda_probe.h"
#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

// Exported entry points: C linkage, default visibility. Everything else in the
// library is hidden (-fvisibility=hidden plus the fakecuda.map version script).
// On Windows the DLL exports exactly what is marked dllexport.
#if defined(_WIN32)
#define FAKE_API extern "C" __declspec(dllexport)
#else
#define FAKE_API extern "C" __attribute__((visibility("default")))
#endif

namespace fake {
struct SharedEvent;  // fakecuda_ipc.cpp
struct Queue;        // one stream's work, in order (fakecuda_streams.cpp)
struct EventRecord;  // an event's last record
}  // namespace fake

// ---- opaque handle types (cuda.h only forward-declares these) ---------------
struct CUctx_st {
    int device = 0;
    int refcount = 0;        // primary-context retain count; active while > 0
    unsigned int flags = 0;
    // Stream work that touched memory that was gone when it ran leaves the
    // context failed, as a fault does on a GPU: every call that uses it
    // answers this code until the context is destroyed (last release).
    CUresult sticky = CUDA_SUCCESS;
    // The legacy default stream, and each thread's per-thread default stream.
    std::shared_ptr<fake::Queue> legacy;
    std::map<std::thread::id, std::shared_ptr<fake::Queue>> per_thread;
};

struct CUstream_st {
    CUctx_st* ctx = nullptr;
    unsigned int flags = 0;
    std::shared_ptr<fake::Queue> queue;  // outlives the handle until its work is done
};

struct CUevent_st {
    CUctx_st* ctx = nullptr;
    unsigned int flags = 0;
    std::shared_ptr<fake::EventRecord> last;  // the last record; null: never recorded
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
    VmmMapped,   // a mapped piece of a VMM reservation (fakecuda_vmm.cpp)
    IpcOpened,   // cuIpcOpenMemHandle: another process's cuMemAlloc memory mapped here
    Pool,        // cuMemAllocAsync / cuMemAllocFromPoolAsync block, or cuMemPoolImportPointer (fakecuda_pool_alloc.cpp)
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
    // VMM: the reserved range this mapping lies in, for
    // CU_POINTER_ATTRIBUTE_RANGE_START_ADDR/_SIZE; 0 = the allocation itself.
    std::uintptr_t range_base = 0;
    std::size_t range_size = 0;
    unsigned long long allowed_handle_types = 0;
    bool host_memory = false;  // VMM: the mapped physical memory lives on a host location (pointer type HOST)
    bool imported = false;     // VMM and pool memory imported from another process (a shareable handle, an exported pointer)
    // Pool blocks: the pool the block came from (or was imported into), for
    // CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE; null for every other kind.
    CUmemPoolHandle_st* pool = nullptr;
    // Managed memory: page-run start offset -> state (piecewise constant).
    std::map<std::size_t, PageState> pages;
};

struct Device {
    std::array<int, CU_DEVICE_ATTRIBUTE_MAX> attr{};
    CUctx_st primary{};
    unsigned long long bytes_in_use = 0;  // cuMemAlloc, VMM physical memory and pool reservations
};

struct FaultRule {
    std::string name;
    long nth = 1;
    bool and_after = false;
    CUresult code = CUDA_ERROR_OUT_OF_MEMORY;
    // CODE "SLOW=MS": the call does not fail but answers MS milliseconds late
    // (a driver call that hangs, for callers that bound their waits).
    unsigned slow_ms = 0;
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

// ---- streams (fakecuda_streams.cpp) -------------------------------------------
// Work enqueued on a stream runs later, on the fake's worker thread, in stream
// order, as a GPU runs it: the calling thread gets its answer first. A piece
// of work waits for its dependencies (earlier work of other streams: the
// legacy stream's implicit synchronization, cuStreamWaitEvent) and, with
// FAKECUDA_STREAM_DELAY_US, for that long once it could start, so tests can
// widen the window in which the work is still pending.

struct State;

// Done when `queue` has completed its work up to `seq`.
struct Dependency {
    std::shared_ptr<Queue> queue;
    std::uint64_t seq = 0;
};

// What a piece of work does, on the worker, with the lock held. An answer
// other than CUDA_SUCCESS (memory it needs is gone) fails the context.
using Task = std::function<CUresult(State&)>;

struct Work {
    std::uint64_t seq = 0;
    std::vector<Dependency> after;
    SharedEvent* ipc_event = nullptr;  // another process's record to wait for (cuStreamWaitEvent)
    std::uint64_t ipc_target = 0;
    Task task;
    bool started = false;  // its dependencies were met at `ready_at` - delay
    std::chrono::steady_clock::time_point ready_at{};
    // A value wait (cuStreamWaitValue*, fakecuda_stream_ops.cpp): the work
    // starts once this holds, re-checked every millisecond (host and other
    // streams write the memory without telling the worker). Past
    // FAKECUDA_STREAM_WAIT_TIMEOUT_MS from when it could first start, the
    // work fails with CUDA_ERROR_LAUNCH_TIMEOUT instead, so a test cannot hang.
    std::function<bool(State&)> until;
    bool until_armed = false;
    std::chrono::steady_clock::time_point until_deadline{};
};

struct Queue {
    CUctx_st* ctx = nullptr;
    bool legacy = false;    // the context's legacy default stream
    bool blocking = false;  // synchronizes with the legacy stream (per-thread and CU_STREAM_DEFAULT streams)
    std::deque<Work> pending;
    std::uint64_t enqueued = 0;   // seq of the last work enqueued
    std::uint64_t completed = 0;  // seq of the last work done (or dropped by a failed context)
    std::uint64_t serial = 0;     // unique for the process's life (a queue's address may be reused)
    // What cuStreamWaitEvent ordered this queue after: other queue's serial ->
    // the highest seq waited for. Memory pools follow these dependencies when
    // they reuse a block freed on another stream (REUSE_FOLLOW_EVENT_DEPENDENCIES).
    std::map<std::uint64_t, std::uint64_t> waited;
};

// An event's record: done when its queue passes `seq`; `when` is set then.
struct EventRecord {
    std::shared_ptr<Queue> queue;
    std::uint64_t seq = 0;
    std::chrono::steady_clock::time_point when{};
};

struct State {
    std::mutex mu;
    std::condition_variable progress;  // work completed or was dropped (waiters re-check)
    std::condition_variable work;      // work was enqueued (the worker re-scans)
    std::vector<std::shared_ptr<Queue>> queues;  // every queue with a handle or work left
    bool worker_started = false;
    unsigned stream_delay_us = 0;  // FAKECUDA_STREAM_DELAY_US / fakecuda_set_stream_delay_us
    unsigned stream_wait_timeout_ms = 10000;  // FAKECUDA_STREAM_WAIT_TIMEOUT_MS / fakecuda_set_stream_wait_timeout_ms

    int init_count = 0;
    bool initialized = false;
    bool deinitialized = false;
    int driver_version = FAKECUDA_DRIVER_VERSION;
    int device_count = 1;
    int numa_nodes = 1;
    // An IMEX channel for fabric handles (FAKECUDA_IMEX, default 0: no real
    // machine measured had one). Without one, cuMemCreate of fabric memory
    // and the export of a fabric pool answer NOT_PERMITTED although the
    // attribute says fabric is supported, as a real driver answers on a
    // machine with no IMEX service. With one, fabric handles work as the
    // fake invents them: modelled, never seen on a real machine.
    bool imex_channel = false;
    std::array<Device, kMaxDevices> devices{};
    // Which physical device (its UUID) answers for each ordinal: the
    // ordinal itself until a checkpoint restore moves the process onto
    // other devices (fakecuda_checkpoint.cpp), as the real driver keeps the
    // ordinals and changes the GPU behind them.
    std::array<int, kMaxDevices> physical = {0, 1, 2, 3, 4, 5, 6, 7};
    int peer[kMaxDevices][kMaxDevices] = {};
    // Peer access enabled from the first context to the second (fakecuda_peer.cpp).
    std::set<std::pair<CUctx_st*, CUctx_st*>> peer_enabled;
    // fakecuda_set_small_alloc_offset: where a one-page cuMemAlloc lands past a page.
    std::size_t small_alloc_offset = 0;

    std::map<std::uintptr_t, Allocation> allocs;        // keyed by base; ranges never overlap
    std::map<std::uintptr_t, std::uintptr_t> aliases;   // registered alias base -> host base
    unsigned long long next_buffer_id = 1;
    long vmm_objects = 0;   // maintained by the VMM emulation
    bool dma_buf_pcie = false;  // fakecuda_set_dma_buf_pcie: the PCIe (BAR1) dma-buf mapping is available
    long ipc_objects = 0;   // maintained by the IPC emulation

    std::set<CUstream_st*> streams;
    std::set<CUevent_st*> events;

    std::map<std::string, long> calls;
    std::vector<FaultRule> faults;
    bool recording_calls = false;          // fakecuda_record_calls
    std::vector<std::string> call_record;  // every cu* call while recording, in order

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
// kNeedsInit entries answer CUDA_ERROR_NOT_INITIALIZED before cuInit and the
// current context's sticky error once it failed; kDeviceLevel entries (device
// queries, context management) do not use the context and keep working.
enum EntryNeeds : unsigned { kNoInit = 0, kNeedsInit = 1, kDeviceLevel = 1 | 2 };

class Call {
public:
    Call(const char* symbol, unsigned needs);
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;
    bool done() const { return done_; }
    CUresult rc() const { return rc_; }
    const char* symbol() const { return symbol_; }
    // The entry running on this thread (its lock is released while it
    // blocks on stream work: see block_until).
    static Call& current();
    std::unique_lock<std::mutex>& lock() { return lock_; }

private:
    std::unique_lock<std::mutex> lock_;
    const char* symbol_;
    bool done_ = false;
    CUresult rc_ = CUDA_SUCCESS;
    Call* outer_ = nullptr;
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
// The UUID of physical device `physical` (fakecuda_identity.cpp), and the
// physical device of a UUID (-1: none of this machine's).
void write_uuid(CUuuid* uuid, int physical);
int physical_of_uuid(const State& st, const CUuuid& uuid);
// Serve checkpoint requests about this process (fakecuda_checkpoint.cpp); once, at cuInit.
void start_checkpoint_service();
int attribute(const State& st, int dev, CUdevice_attribute a);

// The current context if it is active; nullptr otherwise.
CUctx_st* current_context(State& st);
// Is h a context handle this driver handed out?
bool known_context(const State& st, CUctx_st* h);
// Stream validation. Default-stream handles (0, CU_STREAM_LEGACY,
// CU_STREAM_PER_THREAD) resolve to the current context (INVALID_CONTEXT when
// none); other handles must be live streams (INVALID_HANDLE otherwise). A
// failed context answers its sticky error. `per_thread_default` is how the
// entry reads the handle 0 (true for the _ptsz / _ptds forms).
CUresult check_stream(State& st, CUstream s, CUctx_st** ctx_out, bool per_thread_default = false);
bool is_default_stream(CUstream s);

// ---- stream work (fakecuda_streams.cpp; lock held) ---------------------------
// The queue a stream handle stands for (see check_stream).
CUresult stream_queue(State& st, CUstream s, bool per_thread_default, std::shared_ptr<Queue>* out);
// A new created stream's queue.
std::shared_ptr<Queue> new_queue(State& st, CUctx_st* ctx, bool blocking);
// Enqueues `task` after the stream's earlier work, after the implicit
// synchronization of the legacy stream with blocking streams, and after
// `after`. Returns the work's dependency (its queue and seq).
Dependency enqueue(State& st, const std::shared_ptr<Queue>& queue, Task task, std::vector<Dependency> after = {},
                   SharedEvent* ipc_event = nullptr, std::uint64_t ipc_target = 0);
// Blocks the calling entry, its lock released, until `done` holds; false
// after 60 s. `poll` re-checks that often even without progress (state
// another process changes).
bool block_until(State& st, const std::function<bool()>& done,
                 std::chrono::milliseconds poll = std::chrono::milliseconds(0));
// Waits for one piece of work, for everything enqueued on `queue` so far, or
// for everything of a context; the context's sticky error when it failed.
CUresult wait_for(State& st, const Dependency& work);
CUresult wait_queue(State& st, const std::shared_ptr<Queue>& queue);
CUresult wait_context(State& st, CUctx_st* ctx);
// Whether any queue of the context has work not yet done.
bool context_busy(State& st, CUctx_st* ctx);
// Everything pending in the context is done; its queues are dropped.
void drop_context_queues(State& st, CUctx_st* ctx);
bool finished(const Dependency& work);

// Allocation containing [p, p+n) (n may be 0 = just p), through host
// addresses. nullptr when none.
Allocation* find_allocation(State& st, std::uintptr_t p, std::size_t n = 0);
// cuMemAlloc's allocation (also behind cuMemAllocPitch).
CUresult allocate_device_memory(State& st, CUdeviceptr* dptr, std::size_t bytesize);
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
// What backs [p, p + n) of a reservation (fakecuda_vmm.cpp): 0 when p is in
// no reserved range; 1 when every byte of it is mapped, within one
// reservation, by physical memory of one location and identical properties
// (*location gets it); -1 otherwise.
int vmm_backing(State& st, std::uintptr_t p, std::size_t n, CUmemLocation* location);

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
// Release what an allocation owns (mapping, alias, descriptor, device bytes)
// without touching State::allocs: for one already taken out of it.
void release_allocation(State& st, Allocation& a);
// Tear down everything owned by a primary context that reached refcount 0
// (the caller waited for its work first).
void destroy_context_resources(State& st, CUctx_st* ctx);
// The peer access a destroyed context had, both ways, goes with it (fakecuda_peer.cpp).
void peer_context_destroyed(State& st, CUctx_st* ctx);

// ---- inter-process sharing (fakecuda_ipc.cpp) ----------------------------------
// A memfd of `size` bytes (rounded up to pages) that backs cuMemAlloc memory so
// cuIpcGetMemHandle can name it; -1 where the platform has none (then the
// memory is anonymous and cannot be shared).
int shareable_memory_fd(std::size_t size);
// Interprocess-event hooks of the event entries (fakecuda_core.cpp); each is a
// no-op / success for events without shared state.
CUresult ipc_event_create(CUevent_st* e);    // gives a CU_EVENT_INTERPROCESS event its shared state
// A record of an interprocess event: pending in the shared page from the
// record call (ipc_event_record) until its marker runs on the stream
// (ipc_event_complete), or, under fakecuda_hold_events(1), until the hold ends.
struct IpcRecord {
    SharedEvent* shared = nullptr;  // null: not an interprocess event
    std::uint64_t seq = 0;
};
IpcRecord ipc_event_record(CUevent_st* e);
void ipc_event_complete(const IpcRecord& record);
CUresult ipc_event_query(CUevent_st* e);     // CUDA_SUCCESS or CUDA_ERROR_NOT_READY
// Blocks the entry until the last record completes (bounded; LAUNCH_FAILED
// when the recording process died with it pending).
CUresult ipc_event_wait(State& st, CUevent_st* e);
// What cuStreamWaitEvent waits for in the shared page: *shared stays null
// when no record is pending; LAUNCH_FAILED when its recorder died.
CUresult ipc_event_wait_target(CUevent_st* e, SharedEvent** shared, std::uint64_t* target);
// 1 once the page's completed count reaches `target`, 0 while pending, -1 when
// the recording process died with it pending.
int ipc_event_reached(SharedEvent* shared, std::uint64_t target);

// Validate a CUmemLocation for managed-memory calls. `for_prefetch` selects
// the prefetch rules (device needs CONCURRENT_MANAGED_ACCESS). Returns
// CUDA_SUCCESS, CUDA_ERROR_INVALID_DEVICE or CUDA_ERROR_INVALID_VALUE.
CUresult check_location(const State& st, const CUmemLocation& loc, bool for_prefetch);
// Resolve HOST_NUMA_CURRENT etc. to the form the range state stores.
Loc normalize_location(const CUmemLocation& loc);

// ---- stream-ordered allocation and memory pools (fakecuda_pool_alloc.cpp) -------
// A freed block's address is gone for API calls at once, but stream work
// enqueued before the free may still use the bytes until the free's position
// in its stream has run. Stream work therefore names the memory it touches by
// address *and* block: the buffer_id of the device allocation (cuMemAlloc or
// pool block) the call found there, 0 for any other memory.
unsigned long long device_block_id(State& st, std::uintptr_t p);
// Where stream work finds [p, p + n) of block `id`: the live allocation with
// that id, or a block whose cuMemFreeAsync has not yet run in its stream;
// nullptr when the block is gone (the work then fails ILLEGAL_ADDRESS).
void* block_bytes(State& st, std::uintptr_t p, std::size_t n, unsigned long long id);
// Whether p lies in memory a pool reserved (a freed block's address answers
// INVALID_VALUE to calls rather than passing for pageable host memory).
bool pool_address(State& st, std::uintptr_t p);
// Whether a pool block lies in host memory (a HOST / HOST_NUMA pool).
bool pool_on_host(const CUmemPoolHandle_st* pool);
// Where a pool block lies, as CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR / _SIZE
// report it: the pool's chunk that holds it (an imported block: the pages
// mapped for it); left unchanged for anything else.
void pool_block_mapping(const Allocation& block, std::uintptr_t* base, std::size_t* size);
// cuMemFree of a pool block: freed at once, without waiting for stream work
// (the driver documents that it assumes every access is done).
CUresult pool_free_now(State& st, std::uintptr_t base);
// A synchronization returned: frees it guarantees done become reusable from
// any stream, and pools above their release threshold give memory back.
// `covered(queue, seq)`: the synchronization waited for that queue up to seq.
void pools_synchronized(State& st, const std::function<bool(const Queue*, std::uint64_t)>& covered);
// A context was destroyed: stream-ordered frees whose stream went with it are done.
void pools_context_destroyed(State& st);

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
