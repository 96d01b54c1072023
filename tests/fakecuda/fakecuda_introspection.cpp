// fakecuda_introspection.cpp — the fakecuda_* functions of fakecuda_probe.h.
// Not cu* entries: no prologue, not counted, and they work in every variant
// (the stub included) and before cuInit.
#include "fake_pools.hpp"

#include <cstdio>
#include <cstring>

namespace {

using fake::State;

struct Locked {
    State& st = fake::state();
    std::lock_guard<std::mutex> lock{st.mu};
};

int log_size(const std::vector<fakecuda_record>& log) { return static_cast<int>(log.size()); }

int log_at(const std::vector<fakecuda_record>& log, int i, fakecuda_record* out) {
    if (i < 0 || static_cast<std::size_t>(i) >= log.size()) return -1;
    if (out) *out = log[static_cast<std::size_t>(i)];
    return 0;
}

}  // namespace

FAKE_API const char* fakecuda_variant(void) { return FAKECUDA_VARIANT_NAME; }

FAKE_API int fakecuda_driver_version(void) {
    Locked l;
    return l.st.driver_version;
}

FAKE_API int fakecuda_init_count(void) {
    Locked l;
    return l.st.init_count;
}

FAKE_API int fakecuda_device_count(void) {
    Locked l;
    return l.st.device_count;
}

FAKE_API void fakecuda_set_deinitialized(int on) {
    Locked l;
    l.st.deinitialized = on != 0;
}

FAKE_API long fakecuda_call_count(const char* name) {
    if (!name) return 0;
    Locked l;
    auto it = l.st.calls.find(name);
    return it == l.st.calls.end() ? 0 : it->second;
}

FAKE_API void fakecuda_reset_counts(void) {
    Locked l;
    l.st.calls.clear();
}

FAKE_API void fakecuda_record_calls(int on) {
    Locked l;
    if (on) l.st.call_record.clear();
    l.st.recording_calls = on != 0;
}

FAKE_API int fakecuda_recorded_call_count(void) {
    Locked l;
    return static_cast<int>(l.st.call_record.size());
}

FAKE_API int fakecuda_recorded_call(int i, char* name, int size) {
    Locked l;
    if (i < 0 || static_cast<std::size_t>(i) >= l.st.call_record.size()) return -1;
    if (name && size > 0) std::snprintf(name, static_cast<std::size_t>(size), "%s", l.st.call_record[static_cast<std::size_t>(i)].c_str());
    return 0;
}

FAKE_API long fakecuda_live_allocations(void) {
    Locked l;
    long n = 0;
    for (const auto& kv : l.st.allocs) {
        if (kv.second.kind != fake::Kind::VmmMapped) ++n;  // VMM objects count via vmm_objects
    }
    return n + l.st.vmm_objects + l.st.ipc_objects;
}

FAKE_API long fakecuda_live_streams(void) {
    Locked l;
    return static_cast<long>(l.st.streams.size());
}

FAKE_API long fakecuda_live_events(void) {
    Locked l;
    return static_cast<long>(l.st.events.size());
}

FAKE_API unsigned long long fakecuda_device_bytes_in_use(int device) {
    Locked l;
    if (device < 0 || device >= fake::kMaxDevices) return 0;
    return l.st.devices[static_cast<std::size_t>(device)].bytes_in_use;
}

FAKE_API int fakecuda_primary_ctx_refcount(int device) {
    Locked l;
    if (!fake::valid_device(l.st, device)) return -1;
    return l.st.devices[static_cast<std::size_t>(device)].primary.refcount;
}

FAKE_API void fakecuda_set_fail(const char* spec) {
    Locked l;
    fake::set_fail_spec(l.st, spec);
}

FAKE_API void fakecuda_set_attribute(int device, int attribute, int value) {
    Locked l;
    if (attribute <= 0 || attribute >= CU_DEVICE_ATTRIBUTE_MAX) {
        std::fprintf(stderr, "fakecuda_set_attribute: attribute %d out of range\n", attribute);
        return;
    }
    for (int d = 0; d < fake::kMaxDevices; ++d) {
        if (device == -1 || device == d)
            l.st.devices[static_cast<std::size_t>(d)].attr[static_cast<std::size_t>(attribute)] = value;
    }
}

FAKE_API void fakecuda_set_peer_access(int a, int b, int can) {
    Locked l;
    if (a < 0 || b < 0 || a >= fake::kMaxDevices || b >= fake::kMaxDevices) return;
    l.st.peer[a][b] = can;
}

FAKE_API void fakecuda_set_imex_channel(int present) {
    Locked l;
    l.st.imex_channel = present != 0;
}

FAKE_API void fakecuda_set_dma_buf_pcie(int on) {
    Locked l;
    l.st.dma_buf_pcie = on != 0;
}

FAKE_API void fakecuda_set_stream_delay_us(unsigned int us) {
    Locked l;
    l.st.stream_delay_us = us;
    l.st.work.notify_all();
}

FAKE_API long fakecuda_pending_work(void) {
    Locked l;
    long n = 0;
    for (const auto& queue : l.st.queues) n += static_cast<long>(queue->pending.size());
    return n;
}

FAKE_API int fakecuda_context_error(int device) {
    Locked l;
    if (!fake::valid_device(l.st, device)) return -1;
    return static_cast<int>(l.st.devices[static_cast<std::size_t>(device)].primary.sticky);
}

FAKE_API int fakecuda_proc_request_count(void) {
    Locked l;
    return static_cast<int>(l.st.proc_requests.size());
}

FAKE_API int fakecuda_proc_request(int i, const char** name, int* version, unsigned long long* flags) {
    Locked l;
    if (i < 0 || static_cast<std::size_t>(i) >= l.st.proc_requests.size()) return -1;
    const fake::ProcRequest& r = l.st.proc_requests[static_cast<std::size_t>(i)];
    if (name) *name = r.symbol.c_str();  // deque: stable until fakecuda_clear_logs
    if (version) *version = r.version;
    if (flags) *flags = r.flags;
    return 0;
}

FAKE_API int fakecuda_proc_request_at(int i, struct fakecuda_proc_record* out) {
    Locked l;
    if (i < 0 || static_cast<std::size_t>(i) >= l.st.proc_requests.size()) return -1;
    if (!out) return 0;
    const fake::ProcRequest& r = l.st.proc_requests[static_cast<std::size_t>(i)];
    std::memset(out, 0, sizeof *out);
    std::snprintf(out->entry, sizeof out->entry, "%s", r.entry.c_str());
    std::snprintf(out->symbol, sizeof out->symbol, "%s", r.symbol.c_str());
    out->version = r.version;
    out->flags = r.flags;
    out->result = r.result;
    out->status = r.status;
    return 0;
}

FAKE_API int fakecuda_proc_requested(const char* name, int version, unsigned long long flags) {
    if (!name) return 0;
    Locked l;
    int n = 0;
    for (const auto& r : l.st.proc_requests) {
        if (r.symbol != name) continue;
        if (version != -1 && r.version != version) continue;
        if (flags != ~0ULL && r.flags != flags) continue;
        ++n;
    }
    return n;
}

FAKE_API int fakecuda_advice_count(void) {
    Locked l;
    return log_size(l.st.advice_log);
}

FAKE_API int fakecuda_advice_at(int i, struct fakecuda_record* out) {
    Locked l;
    return log_at(l.st.advice_log, i, out);
}

FAKE_API int fakecuda_prefetch_count(void) {
    Locked l;
    return log_size(l.st.prefetch_log);
}

FAKE_API int fakecuda_prefetch_at(int i, struct fakecuda_record* out) {
    Locked l;
    return log_at(l.st.prefetch_log, i, out);
}

FAKE_API void fakecuda_clear_logs(void) {
    Locked l;
    l.st.proc_requests.clear();
    l.st.advice_log.clear();
    l.st.prefetch_log.clear();
}

// ---- memory pools ---------------------------------------------------------------------------------

using fake::mempool::Pool;
using fake::mempool::pools;

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
    for (const auto& kv : l.st.allocs) n += kv.second.kind == fake::Kind::Pool ? 1 : 0;
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
