// fakecuda_core.cpp — initialisation, versions, cuGetProcAddress, devices,
// primary contexts, streams, events, and the module/launch entries the
// emulated device cannot serve.
#include "fake_state.hpp"
#include "fake_enum.hpp"

#include <cstdio>
#include <cstring>
#include <cstdint>
#include <set>

namespace {

using fake::State;

// ---- cuGetProcAddress ------------------------------------------------------------
// (legacy, a 10.1 driver, has no cuGetProcAddress: dlsym is its only way in)
#if FAKE_HAS(11030)

void record_proc_request(State& st, const char* entry, const char* symbol, int version,
                         cuuint64_t flags, CUresult rc, int status) {
    fake::ProcRequest r;
    r.entry = entry;
    r.symbol = symbol ? symbol : "(null)";
    r.version = version;
    r.flags = flags;
    r.result = rc;
    r.status = status;
    st.proc_requests.push_back(std::move(r));
}

// What driver 580 (CUDA 13.0) answers, minus its symbol coverage:
//  - version above the driver's: CUDA_ERROR_INVALID_VALUE, status unwritten;
//  - the highest registered ABI <= version: SUCCESS (per-thread twin when
//    asked for and one exists);
//  - the base name exists only at higher ABIs: VERSION_NOT_SUFFICIENT;
//  - suffixed ("cuMemAlloc_v2") or unknown names: SYMBOL_NOT_FOUND.
// *status is -1 when nothing is to be written.
CUresult proc_lookup(State& st, const char* symbol, void** pfn, int version, cuuint64_t flags,
                     int* status) {
    *status = -1;
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    *pfn = nullptr;
    if (version > st.driver_version) return CUDA_ERROR_INVALID_VALUE;
    const cuuint64_t known_flags = CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    if (flags & ~known_flags) return CUDA_ERROR_INVALID_VALUE;

    std::size_t n = 0;
    const fake::ProcEntry* table = fake::proc_entries(&n);
    const fake::ProcEntry* best = nullptr;
    bool name_known = false;
    for (std::size_t i = 0; i < n; ++i) {
        const fake::ProcEntry& e = table[i];
        if (std::strcmp(e.base, symbol) != 0) continue;
        name_known = true;
        if (e.version <= version && (!best || e.version > best->version)) best = &e;
    }
    if (!best) {
        *status = name_known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_SUCCESS;
    }
    const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    *pfn = (per_thread && best->per_thread) ? best->per_thread : best->legacy;
    *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

#endif  // FAKE_HAS(11030)

}  // namespace

// ---- initialisation and versions -------------------------------------------------

FAKE_API CUresult CUDAAPI cuInit(unsigned int Flags) {
    FAKE_ENTER(fake::kNoInit);
    State& st = fake::state();
    if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (FAKECUDA_IS_BROKEN) return CUDA_ERROR_NO_DEVICE;
    if (st.device_count == 0) return CUDA_ERROR_NO_DEVICE;
    st.initialized = true;
    fake::start_checkpoint_service();
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) {
    FAKE_ENTER(fake::kNoInit);
    if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = fake::state().driver_version;
    return CUDA_SUCCESS;
}

#if FAKE_HAS(11030)
FAKE_API CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                           cuuint64_t flags) {
    fake::Call call(__func__, fake::kNoInit);
    State& st = fake::state();
    if (call.done()) {
        record_proc_request(st, __func__, symbol, cudaVersion, flags, call.rc(), -1);
        return call.rc();
    }
    int status = -1;
    const CUresult rc = proc_lookup(st, symbol, pfn, cudaVersion, flags, &status);
    record_proc_request(st, __func__, symbol, cudaVersion, flags, rc, -1);
    return rc;
}
#endif

#if FAKE_HAS(12000)
FAKE_API CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                              cuuint64_t flags,
                                              CUdriverProcAddressQueryResult* symbolStatus) {
    fake::Call call(__func__, fake::kNoInit);
    State& st = fake::state();
    if (call.done()) {
        record_proc_request(st, __func__, symbol, cudaVersion, flags, call.rc(), -1);
        return call.rc();
    }
    int status = -1;
    const CUresult rc = proc_lookup(st, symbol, pfn, cudaVersion, flags, &status);
    if (status >= 0 && symbolStatus) {
        *symbolStatus = static_cast<CUdriverProcAddressQueryResult>(status);
    } else {
        status = -1;
    }
    record_proc_request(st, __func__, symbol, cudaVersion, flags, rc, status);
    return rc;
}
#endif

// ---- devices ----------------------------------------------------------------------

FAKE_API CUresult CUDAAPI cuDeviceGetCount(int* count) {
    FAKE_ENTER(fake::kDeviceLevel);
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = fake::state().device_count;
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
    FAKE_ENTER(fake::kDeviceLevel);
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::valid_device(fake::state(), ordinal)) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
    FAKE_ENTER(fake::kDeviceLevel);
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::valid_device(fake::state(), dev)) return CUDA_ERROR_INVALID_DEVICE;
    std::snprintf(name, static_cast<std::size_t>(len), "cudyn emulated device %d", dev);
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
    FAKE_ENTER(fake::kDeviceLevel);
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::valid_device(fake::state(), dev)) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = static_cast<size_t>(fake::kTotalMemory);
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
    FAKE_ENTER(fake::kDeviceLevel);
    State& st = fake::state();
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::valid_device(st, dev)) return CUDA_ERROR_INVALID_DEVICE;
    const int a = fake::raw(attrib);
    if (a <= 0 || a >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    *pi = st.devices[static_cast<std::size_t>(dev)].attr[static_cast<std::size_t>(a)];
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peerDev) {
    FAKE_ENTER(fake::kDeviceLevel);
    State& st = fake::state();
    if (!canAccessPeer) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::valid_device(st, dev) || !fake::valid_device(st, peerDev)) return CUDA_ERROR_INVALID_DEVICE;
    *canAccessPeer = (dev == peerDev) ? 0 : st.peer[dev][peerDev];
    return CUDA_SUCCESS;
}

// ---- primary contexts -------------------------------------------------------------

FAKE_API CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
    FAKE_ENTER(fake::kDeviceLevel);
    State& st = fake::state();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::valid_device(st, dev)) return CUDA_ERROR_INVALID_DEVICE;
    CUctx_st& ctx = st.devices[static_cast<std::size_t>(dev)].primary;
    ++ctx.refcount;
    *pctx = &ctx;
    return CUDA_SUCCESS;
}

namespace {
// Dropping the last reference destroys the context and everything it owns,
// as the real driver does.
CUresult primary_release(CUdevice dev) {
    State& st = fake::state();
    if (!fake::valid_device(st, dev)) return CUDA_ERROR_INVALID_DEVICE;
    CUctx_st& ctx = st.devices[static_cast<std::size_t>(dev)].primary;
    // The last release waits for the context's work before it destroys the
    // context (measured: it returned once a running kernel was done). The lock
    // is released while it waits, so look again afterwards: another thread
    // may have retained or released meanwhile, or enqueued more work.
    while (ctx.refcount == 1 && fake::context_busy(st, &ctx))
        if (fake::wait_context(st, &ctx) == CUDA_ERROR_LAUNCH_TIMEOUT) break;  // bounded, as every wait
    if (ctx.refcount <= 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--ctx.refcount == 0) fake::destroy_context_resources(st, &ctx);
    return CUDA_SUCCESS;
}
}  // namespace

FAKE_API CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
    FAKE_ENTER(fake::kDeviceLevel);
    return primary_release(dev);
}

#if FAKE_HAS(11000)
FAKE_API CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    FAKE_ENTER(fake::kDeviceLevel);
    return primary_release(dev);
}
#endif

FAKE_API CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
    FAKE_ENTER(fake::kDeviceLevel);
    State& st = fake::state();
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::valid_device(st, dev)) return CUDA_ERROR_INVALID_DEVICE;
    const CUctx_st& ctx = st.devices[static_cast<std::size_t>(dev)].primary;
    *flags = ctx.flags;
    *active = ctx.refcount > 0 ? 1 : 0;
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
    FAKE_ENTER(fake::kDeviceLevel);
    if (ctx && !fake::known_context(fake::state(), ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    fake::tls_current() = ctx;
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
    FAKE_ENTER(fake::kDeviceLevel);
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = fake::tls_current();
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
    FAKE_ENTER(fake::kDeviceLevel);
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* ctx = fake::current_context(fake::state());
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    *device = ctx->device;
    return CUDA_SUCCESS;
}

namespace {
// A context synchronization; memory pools then act on the frees it
// guarantees done and on their release thresholds.
CUresult context_synchronize(State& st, CUctx_st* ctx) {
    if (CUresult rc = fake::wait_context(st, ctx)) return rc;
    fake::pools_synchronized(st, [ctx](const fake::Queue* queue, std::uint64_t) { return queue->ctx == ctx; });
    return CUDA_SUCCESS;
}
}  // namespace

FAKE_API CUresult CUDAAPI cuCtxSynchronize(void) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    CUctx_st* ctx = fake::current_context(st);
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    return context_synchronize(st, ctx);
}

#if FAKE_HAS(13000)
namespace {
CUctx_st* explicit_or_current(State& st, CUcontext ctx) {
    if (!ctx) return fake::current_context(st);
    if (!fake::known_context(st, ctx) || ctx->refcount <= 0) return nullptr;
    return ctx;
}
}  // namespace

FAKE_API CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
    FAKE_ENTER(fake::kDeviceLevel);
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* c = explicit_or_current(fake::state(), ctx);
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    *device = c->device;
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    CUctx_st* c = explicit_or_current(st, ctx);
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    return context_synchronize(st, c);
}
#endif

// ---- streams -------------------------------------------------------------------------
// Work on a stream runs later, on the fake's worker (fakecuda_streams.cpp).

FAKE_API CUresult CUDAAPI cuStreamCreate(CUstream* phStream, unsigned int Flags) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!phStream) return CUDA_ERROR_INVALID_VALUE;
    if (Flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* ctx = fake::current_context(st);
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    auto* s = new CUstream_st;
    s->ctx = ctx;
    s->flags = Flags;
    s->queue = fake::new_queue(st, ctx, (Flags & CU_STREAM_NON_BLOCKING) == 0);
    st.streams.insert(s);
    *phStream = s;
    return CUDA_SUCCESS;
}

namespace {
// The handle goes at once; work already enqueued still runs (the queue
// outlives the handle), as cuStreamDestroy documents and the GPU showed.
CUresult stream_destroy(CUstream s) {
    State& st = fake::state();
    auto it = st.streams.find(s);
    if (it == st.streams.end()) return CUDA_ERROR_INVALID_HANDLE;
    delete *it;
    st.streams.erase(it);
    return CUDA_SUCCESS;
}

CUresult stream_synchronize(CUstream s, bool per_thread_default) {
    State& st = fake::state();
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = fake::stream_queue(st, s, per_thread_default, &queue)) return rc;
    if (CUresult rc = fake::wait_queue(st, queue)) return rc;
    // What wait_queue waited for: the queue, and with the legacy stream the
    // blocking streams of its context.
    const fake::Queue* synced = queue.get();
    fake::pools_synchronized(st, [synced](const fake::Queue* other, std::uint64_t) {
        return other == synced || (synced->legacy && other->ctx == synced->ctx && other->blocking);
    });
    return CUDA_SUCCESS;
}

CUresult stream_query(CUstream s, bool per_thread_default) {
    State& st = fake::state();
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = fake::stream_queue(st, s, per_thread_default, &queue)) return rc;
    return queue->completed >= queue->enqueued ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

// Work enqueued on `s` after this waits for the event's last record: one in
// this process as a dependency, one in another process (an opened
// interprocess event) through the shared page.
CUresult stream_wait_event(CUstream s, CUevent e, unsigned int flags, bool per_thread_default) {
    State& st = fake::state();
    if (flags & ~static_cast<unsigned>(CU_EVENT_WAIT_EXTERNAL)) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = fake::stream_queue(st, s, per_thread_default, &queue)) return rc;
    if (st.events.count(e) == 0) return CUDA_ERROR_INVALID_HANDLE;
    std::vector<fake::Dependency> after;
    if (e->last && !fake::finished({e->last->queue, e->last->seq})) after.push_back({e->last->queue, e->last->seq});
    // The queue is ordered after the record from here on, done or not: a pool
    // may hand this stream memory freed before the record on the other one.
    if (e->last && e->last->queue && e->last->queue != queue) {
        std::uint64_t& seen = queue->waited[e->last->queue->serial];
        if (seen < e->last->seq) seen = e->last->seq;
    }
    fake::SharedEvent* shared = nullptr;
    std::uint64_t target = 0;
    if (CUresult rc = fake::ipc_event_wait_target(e, &shared, &target)) return rc;
    if (after.empty() && shared == nullptr) return CUDA_SUCCESS;  // nothing pending: nothing to wait for
    fake::enqueue(
        st, queue,
        [shared, target](State&) {
            return shared && fake::ipc_event_reached(shared, target) < 0 ? CUDA_ERROR_LAUNCH_FAILED : CUDA_SUCCESS;
        },
        std::move(after), shared, target);
    return CUDA_SUCCESS;
}

// A marker on the stream: the record completes when the work before it has.
CUresult event_record(CUevent e, CUstream s, bool per_thread_default) {
    State& st = fake::state();
    if (st.events.count(e) == 0) return CUDA_ERROR_INVALID_HANDLE;
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = fake::stream_queue(st, s, per_thread_default, &queue)) return rc;
    // The event and the stream must be of one context.
    if (queue->ctx != e->ctx) return CUDA_ERROR_INVALID_HANDLE;
    auto record = std::make_shared<fake::EventRecord>();
    const fake::IpcRecord shared = fake::ipc_event_record(e);
    const fake::Dependency done = fake::enqueue(st, queue, [record, shared](State&) {
        record->when = std::chrono::steady_clock::now();
        fake::ipc_event_complete(shared);
        return CUDA_SUCCESS;
    });
    record->queue = done.queue;
    record->seq = done.seq;
    e->last = std::move(record);
    return CUDA_SUCCESS;
}

// The record is done in this process, and (interprocess) in the shared page.
bool event_done(CUevent e) {
    return (!e->last || fake::finished({e->last->queue, e->last->seq})) && fake::ipc_event_query(e) == CUDA_SUCCESS;
}

CUresult event_synchronize(CUevent e) {
    State& st = fake::state();
    if (st.events.count(e) == 0) return CUDA_ERROR_INVALID_HANDLE;
    if (e->last) {
        const std::shared_ptr<fake::EventRecord> last = e->last;
        if (CUresult rc = fake::wait_for(st, {last->queue, last->seq})) return rc;
        const fake::Queue* recorded = last->queue.get();
        const std::uint64_t upto = last->seq;
        fake::pools_synchronized(st, [recorded, upto](const fake::Queue* queue, std::uint64_t seq) {
            return queue == recorded && seq <= upto;
        });
    }
    return fake::ipc_event_wait(st, e);
}

// The driver frees an event whose record is pending once the record is done;
// the fake waits for the record's marker instead (it writes the event's
// state), which takes no longer than the stream work before it.
CUresult event_destroy(CUevent e) {
    State& st = fake::state();
    if (st.events.count(e) == 0) return CUDA_ERROR_INVALID_HANDLE;
    if (e->last) {
        const std::shared_ptr<fake::EventRecord> last = e->last;
        (void)fake::block_until(st, [&] { return fake::finished({last->queue, last->seq}); });
    }
    auto it = st.events.find(e);
    if (it == st.events.end()) return CUDA_ERROR_INVALID_HANDLE;  // destroyed by another thread meanwhile
    delete *it;
    st.events.erase(it);
    return CUDA_SUCCESS;
}

CUresult event_elapsed(float* ms, CUevent start, CUevent end) {
    State& st = fake::state();
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    if (st.events.count(start) == 0 || st.events.count(end) == 0) return CUDA_ERROR_INVALID_HANDLE;
    if ((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    if (!start->last || !end->last) return CUDA_ERROR_INVALID_HANDLE;
    if (!event_done(start) || !event_done(end)) return CUDA_ERROR_NOT_READY;
    *ms = std::chrono::duration<float, std::milli>(end->last->when - start->last->when).count();
    return CUDA_SUCCESS;
}
}  // namespace

FAKE_API CUresult CUDAAPI cuStreamDestroy(CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return stream_destroy(hStream);
}

FAKE_API CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return stream_destroy(hStream);
}

FAKE_API CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return stream_synchronize(hStream, false);
}

FAKE_API CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return stream_synchronize(hStream, true);
}

FAKE_API CUresult CUDAAPI cuStreamQuery(CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return stream_query(hStream, false);
}

FAKE_API CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return stream_query(hStream, true);
}

FAKE_API CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return stream_wait_event(hStream, hEvent, Flags, false);
}

FAKE_API CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return stream_wait_event(hStream, hEvent, Flags, true);
}

// ---- events ----------------------------------------------------------------------------

FAKE_API CUresult CUDAAPI cuEventCreate(CUevent* phEvent, unsigned int Flags) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!phEvent) return CUDA_ERROR_INVALID_VALUE;
    const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (Flags & ~known) return CUDA_ERROR_INVALID_VALUE;
    if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* ctx = fake::current_context(st);
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    auto* e = new CUevent_st;
    e->ctx = ctx;
    e->flags = Flags;
    if (CUresult rc = fake::ipc_event_create(e)) {
        delete e;
        return rc;
    }
    st.events.insert(e);
    *phEvent = e;
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuEventDestroy(CUevent hEvent) {
    FAKE_ENTER(fake::kNeedsInit);
    return event_destroy(hEvent);
}

FAKE_API CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent) {
    FAKE_ENTER(fake::kNeedsInit);
    return event_destroy(hEvent);
}

FAKE_API CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return event_record(hEvent, hStream, false);
}

FAKE_API CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return event_record(hEvent, hStream, true);
}

FAKE_API CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
    FAKE_ENTER(fake::kNeedsInit);
    return event_synchronize(hEvent);
}

FAKE_API CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
    FAKE_ENTER(fake::kNeedsInit);
    if (fake::state().events.count(hEvent) == 0) return CUDA_ERROR_INVALID_HANDLE;
    return event_done(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

FAKE_API CUresult CUDAAPI cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
    FAKE_ENTER(fake::kNeedsInit);
    return event_elapsed(pMilliseconds, hStart, hEnd);
}

#if FAKE_HAS(12080)
FAKE_API CUresult CUDAAPI cuEventElapsedTime_v2(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
    FAKE_ENTER(fake::kNeedsInit);
    return event_elapsed(pMilliseconds, hStart, hEnd);
}
#endif

// ---- modules and launches ------------------------------------------------------------------
// The emulated device runs no code.

// Modules: the fake has no JIT and runs no kernel, but it loads PTX text as
// far as the real driver decides from the header, so a trial load (the
// capability fingerprint's newest-PTX probe) gets the real answers: a PTX ISA
// newer than the driver's release is CUDA_ERROR_UNSUPPORTED_PTX_VERSION, text
// without a ".version" line is CUDA_ERROR_INVALID_PTX. A loaded module is a
// token counted by fakecuda_live_modules until cuModuleUnload.
namespace {

// The newest PTX ISA (major * 10 + minor) of each CUDA release the variants report.
int newest_ptx_isa() {
    const int v = FAKECUDA_DRIVER_VERSION;
    if (v >= 13000) return 90;
    if (v >= 12080) return 87;
    if (v >= 11080) return 78;
    return 64;  // 10.1
}

struct LoadedModules {
    std::set<CUmodule> live;
    std::uintptr_t next = 0x6d6f6400;  // "mod": distinct from every other fake handle
};
LoadedModules& modules() {
    static LoadedModules m;
    return m;
}

}  // namespace

FAKE_API CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
    FAKE_ENTER(fake::kNeedsInit);
    if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::current_context(fake::state())) return CUDA_ERROR_INVALID_CONTEXT;
    const char* text = static_cast<const char*>(image);
    const char* version = std::strstr(text, ".version ");
    int major = 0, minor = 0;
    if (!version || std::sscanf(version, ".version %d.%d", &major, &minor) != 2) return CUDA_ERROR_INVALID_PTX;
    if (major * 10 + minor > newest_ptx_isa()) return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
    LoadedModules& m = modules();
    CUmodule loaded = reinterpret_cast<CUmodule>(m.next += 0x10);
    m.live.insert(loaded);
    *module = loaded;
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuModuleUnload(CUmodule module) {
    FAKE_ENTER(fake::kNeedsInit);
    return modules().live.erase(module) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FAKE_API long fakecuda_live_modules(void) {
    std::lock_guard<std::mutex> lock(fake::state().mu);
    return static_cast<long>(modules().live.size());
}

FAKE_API CUresult CUDAAPI cuModuleGetFunction(CUfunction*, CUmodule, const char*) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult CUDAAPI cuLaunchKernel(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                                         unsigned int, unsigned int, unsigned int, CUstream, void**, void**) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction, unsigned int, unsigned int, unsigned int,
                                              unsigned int, unsigned int, unsigned int, unsigned int, CUstream,
                                              void**, void**) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}
