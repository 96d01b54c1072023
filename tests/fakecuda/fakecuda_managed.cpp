// fakecuda_managed.cpp — managed memory: allocation, advice (v1 CUdevice and
// v2 CUmemLocation ABIs), prefetch (v1, v2, per-thread, batch) and range
// attributes. State is kept per page run of each allocation, so
// cuMemRangeGetAttribute answers for any sub-range ("mixed" included); every
// successful call is logged for fakecuda_advice_at / fakecuda_prefetch_at.
#include "fake_state.hpp"
#include "fake_enum.hpp"

#include <algorithm>

namespace {

using fake::Allocation;
using fake::Kind;
using fake::Loc;
using fake::PageState;
using fake::State;

// ---- page runs -----------------------------------------------------------------------

struct Span {
    Allocation* alloc = nullptr;
    std::size_t first = 0;  // page-rounded offsets into the allocation
    std::size_t last = 0;   // exclusive
};

// [p, p+count) inside one managed allocation, rounded out to whole pages.
bool managed_span(State& st, CUdeviceptr p, std::size_t count, Span* out) {
    if (count == 0) return false;
    Allocation* a = fake::find_allocation(st, static_cast<std::uintptr_t>(p), count);
    if (!a || a->kind != Kind::Managed) return false;
    const std::size_t off = static_cast<std::uintptr_t>(p) - a->base;
    out->alloc = a;
    out->first = off / fake::kPageSize * fake::kPageSize;
    out->last = std::min(a->mapping_size, (off + count + fake::kPageSize - 1) / fake::kPageSize * fake::kPageSize);
    return true;
}

void split_at(std::map<std::size_t, PageState>& pages, std::size_t off) {
    auto it = pages.upper_bound(off);
    --it;  // pages always holds offset 0
    if (it->first != off) pages.emplace_hint(std::next(it), off, it->second);
}

template <typename F>
void update(const Span& s, F f) {
    auto& pages = s.alloc->pages;
    split_at(pages, s.first);
    if (s.last < s.alloc->mapping_size) split_at(pages, s.last);
    for (auto it = pages.find(s.first); it != pages.end() && it->first < s.last; ++it) f(it->second);
}

template <typename F>
void for_runs(const Span& s, F f) {
    const auto& pages = s.alloc->pages;
    auto it = pages.upper_bound(s.first);
    --it;
    for (; it != pages.end() && it->first < s.last; ++it) f(it->second);
}

// The location every run agrees on, or INVALID when they differ.
template <typename Get>
Loc uniform(const Span& s, Get get) {
    bool first = true;
    Loc result{};
    bool mixed = false;
    for_runs(s, [&](const PageState& ps) {
        const Loc l = get(ps);
        if (first) {
            result = l;
            first = false;
        } else if (l != result) {
            mixed = true;
        }
    });
    return mixed ? Loc{} : result;
}

int as_v1_device(const Loc& l) {
    switch (l.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE: return l.id;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA: return CU_DEVICE_CPU;
    default: return CU_DEVICE_INVALID;
    }
}

std::uint32_t access_bit(const Loc& l) {
    return l.type == CU_MEM_LOCATION_TYPE_DEVICE ? (1u << l.id) : PageState::kHostBit;
}

// v1 CUdevice argument -> location (CU_DEVICE_CPU is the host).
CUmemLocation from_v1_device(CUdevice dev) {
    CUmemLocation loc{};
    if (dev == CU_DEVICE_CPU) {
        loc.type = CU_MEM_LOCATION_TYPE_HOST;
        loc.id = CU_DEVICE_CPU;
    } else {
        loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
        loc.id = dev;
    }
    return loc;
}

// ---- advice ----------------------------------------------------------------------------------

bool advice_takes_location(int advice) {
    return advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION || advice == CU_MEM_ADVISE_SET_ACCESSED_BY ||
           advice == CU_MEM_ADVISE_UNSET_ACCESSED_BY;
}

// advice is an int: the caller's CUmem_advise, read by fake::raw.
CUresult advise(State& st, const char* entry, CUdeviceptr p, std::size_t count, int advice,
                const CUmemLocation& loc, const CUmemLocation& logged) {
    if (advice < CU_MEM_ADVISE_SET_READ_MOSTLY || advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY)
        return CUDA_ERROR_INVALID_VALUE;
    Span span;
    if (!managed_span(st, p, count, &span)) return CUDA_ERROR_INVALID_VALUE;
    if (advice_takes_location(advice)) {
        if (CUresult rc = fake::check_location(st, loc, false)) return rc;
        if (advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION && loc.type == CU_MEM_LOCATION_TYPE_DEVICE &&
            fake::attribute(st, loc.id, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) == 0)
            return CUDA_ERROR_INVALID_DEVICE;
    }
    const Loc where = fake::normalize_location(loc);
    switch (advice) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY: update(span, [](PageState& ps) { ps.read_mostly = true; }); break;
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY: update(span, [](PageState& ps) { ps.read_mostly = false; }); break;
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION: update(span, [&](PageState& ps) { ps.preferred = where; }); break;
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION: update(span, [](PageState& ps) { ps.preferred = Loc{}; }); break;
    case CU_MEM_ADVISE_SET_ACCESSED_BY: update(span, [&](PageState& ps) { ps.accessed_by |= access_bit(where); }); break;
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY: update(span, [&](PageState& ps) { ps.accessed_by &= ~access_bit(where); }); break;
    default: break;
    }
    fake::log_record(st.advice_log, entry, static_cast<std::uintptr_t>(p), count, advice, logged.type, logged.id,
                     nullptr, 0, ++st.call_seq);
    return CUDA_SUCCESS;
}

// ---- prefetch -----------------------------------------------------------------------------------

CUresult prefetch_check(State& st, CUdeviceptr p, std::size_t count, const CUmemLocation& loc, Span* span) {
    if (!managed_span(st, p, count, span)) return CUDA_ERROR_INVALID_VALUE;
    return fake::check_location(st, loc, true);
}

void prefetch_apply(const Span& span, const CUmemLocation& loc) {
    const Loc where = fake::normalize_location(loc);
    update(span, [&](PageState& ps) { ps.last_prefetch = where; });
}

// The migration itself is stream work: the range must still be managed
// memory when the stream gets to it (a GPU faults otherwise). The prefetch
// state is recorded at the call, as the driver's range attributes report it.
CUresult enqueue_migration(State& st, const std::shared_ptr<fake::Queue>& queue,
                           std::vector<std::pair<std::uintptr_t, std::size_t>> ranges) {
    fake::enqueue(st, queue, [ranges](State& s) {
        for (const auto& range : ranges) {
            const Allocation* a = fake::find_allocation(s, range.first, range.second);
            if (!a || a->kind != Kind::Managed) return CUDA_ERROR_ILLEGAL_ADDRESS;
        }
        return CUDA_SUCCESS;
    });
    return CUDA_SUCCESS;
}

CUresult prefetch_v1(const char* entry, CUdeviceptr p, std::size_t count, CUdevice dst, CUstream s,
                     bool per_thread) {
    State& st = fake::state();
    if (dst != CU_DEVICE_CPU && !fake::valid_device(st, dst)) return CUDA_ERROR_INVALID_DEVICE;
    const CUmemLocation loc = from_v1_device(dst);
    Span span;
    if (CUresult rc = prefetch_check(st, p, count, loc, &span)) return rc;
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = fake::stream_queue(st, s, per_thread, &queue)) return rc;
    prefetch_apply(span, loc);
    fake::log_record(st.prefetch_log, entry, static_cast<std::uintptr_t>(p), count, 0, loc.type, loc.id, s, 0,
                     ++st.call_seq);
    return enqueue_migration(st, queue, {{static_cast<std::uintptr_t>(p), count}});
}

#if FAKE_HAS(12020)
CUresult prefetch_v2(const char* entry, CUdeviceptr p, std::size_t count, const CUmemLocation& loc,
                     unsigned int flags, CUstream s, bool per_thread) {
    State& st = fake::state();
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    Span span;
    if (CUresult rc = prefetch_check(st, p, count, loc, &span)) return rc;
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = fake::stream_queue(st, s, per_thread, &queue)) return rc;
    prefetch_apply(span, loc);
    fake::log_record(st.prefetch_log, entry, static_cast<std::uintptr_t>(p), count, 0, loc.type, loc.id, s, flags,
                     ++st.call_seq);
    return enqueue_migration(st, queue, {{static_cast<std::uintptr_t>(p), count}});
}
#endif

#if FAKE_HAS(13000)
// prefetchLocs[k] applies to ranges prefetchLocIdxs[k] .. prefetchLocIdxs[k+1]-1
// (the last one through count-1); prefetchLocIdxs[0] is 0, the indices rise
// strictly and stay below count. The whole batch is checked before any of it
// is applied. The legacy NULL stream is refused.
CUresult prefetch_batch(const char* entry, bool per_thread_entry, CUdeviceptr* dptrs, size_t* sizes, size_t count,
                        CUmemLocation* locs, size_t* locIdxs, size_t numLocs, unsigned long long flags,
                        CUstream s) {
    State& st = fake::state();
    if (!dptrs || !sizes || !locs || !locIdxs || count == 0) return CUDA_ERROR_INVALID_VALUE;
    if (numLocs == 0 || numLocs > count || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (s == CU_STREAM_LEGACY || (s == nullptr && !per_thread_entry)) return CUDA_ERROR_INVALID_VALUE;
    if (locIdxs[0] != 0) return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 1; k < numLocs; ++k) {
        if (locIdxs[k] <= locIdxs[k - 1]) return CUDA_ERROR_INVALID_VALUE;
    }
    if (locIdxs[numLocs - 1] >= count) return CUDA_ERROR_INVALID_VALUE;
    for (int d = 0; d < st.device_count; ++d) {
        if (fake::attribute(st, d, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) == 0)
            return CUDA_ERROR_INVALID_DEVICE;
    }
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = fake::stream_queue(st, s, per_thread_entry, &queue)) return rc;

    std::vector<Span> spans(count);
    std::vector<size_t> which(count);
    size_t k = 0;
    for (size_t i = 0; i < count; ++i) {
        while (k + 1 < numLocs && locIdxs[k + 1] <= i) ++k;
        which[i] = k;
        if (CUresult rc = prefetch_check(st, dptrs[i], sizes[i], locs[k], &spans[i])) return rc;
    }
    const long seq = ++st.call_seq;
    std::vector<std::pair<std::uintptr_t, std::size_t>> ranges;
    for (size_t i = 0; i < count; ++i) {
        const CUmemLocation& loc = locs[which[i]];
        prefetch_apply(spans[i], loc);
        fake::log_record(st.prefetch_log, entry, static_cast<std::uintptr_t>(dptrs[i]), sizes[i], 0, loc.type,
                         loc.id, s, flags, seq);
        ranges.emplace_back(static_cast<std::uintptr_t>(dptrs[i]), sizes[i]);
    }
    return enqueue_migration(st, queue, std::move(ranges));
}

// cuMemDiscardBatchAsync and the discard half of
// cuMemDiscardAndPrefetchBatchAsync: the same refusals as the prefetch batch
// (null arrays, count 0, flags, the legacy NULL stream, a device without
// CONCURRENT_MANAGED_ACCESS, a range outside managed memory), then, in stream
// order, every byte of each range is overwritten with fakecuda_discard_poison
// (0xDD): the driver leaves a discarded range's contents indeterminate, and
// poison catches a reader that relies on them surviving.
CUresult discard_batch(bool per_thread_entry, CUdeviceptr* dptrs, size_t* sizes, size_t count,
                       unsigned long long flags, CUstream s) {
    State& st = fake::state();
    if (!dptrs || !sizes || count == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (s == CU_STREAM_LEGACY || (s == nullptr && !per_thread_entry)) return CUDA_ERROR_INVALID_VALUE;
    for (int d = 0; d < st.device_count; ++d) {
        if (fake::attribute(st, d, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) == 0)
            return CUDA_ERROR_INVALID_DEVICE;
    }
    std::vector<std::pair<std::uintptr_t, std::size_t>> ranges;
    for (size_t i = 0; i < count; ++i) {
        const auto p = static_cast<std::uintptr_t>(dptrs[i]);
        const Allocation* a = fake::find_allocation(st, p, sizes[i]);
        if (sizes[i] == 0 || !a || a->kind != Kind::Managed) return CUDA_ERROR_INVALID_VALUE;
        ranges.emplace_back(p, sizes[i]);
    }
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = fake::stream_queue(st, s, per_thread_entry, &queue)) return rc;
    fake::enqueue(st, queue, [ranges](State& state) {
        for (const auto& range : ranges) {
            const Allocation* a = fake::find_allocation(state, range.first, range.second);
            if (!a || a->kind != Kind::Managed) return CUDA_ERROR_ILLEGAL_ADDRESS;
            std::memset(reinterpret_cast<void*>(range.first), FAKECUDA_DISCARD_POISON, range.second);
        }
        return CUDA_SUCCESS;
    });
    return CUDA_SUCCESS;
}
#endif

}  // namespace

// ---- allocation ------------------------------------------------------------------------------------

FAKE_API CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* ctx = fake::current_context(st);
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    if (fake::attribute(st, ctx->device, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) == 0) return CUDA_ERROR_NOT_SUPPORTED;
    std::size_t mapping_size = 0;
    void* m = fake::map_memory(bytesize, &mapping_size);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    Allocation a;
    a.base = reinterpret_cast<std::uintptr_t>(m);
    a.size = bytesize;
    a.kind = Kind::Managed;
    a.device = ctx->device;
    a.ctx = ctx;
    a.flags = flags;
    a.mapping = m;
    a.mapping_size = mapping_size;
    a.buffer_id = st.next_buffer_id++;
    a.pages.emplace(0, PageState{});
    st.allocs.emplace(a.base, std::move(a));
    *dptr = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(m));
    return CUDA_SUCCESS;
}

// ---- advice ------------------------------------------------------------------------------------------

// v1 (8000): the target is a CUdevice, CU_DEVICE_CPU for the host. Logged as
// the decoded location (DEVICE/n or HOST/-1).
FAKE_API CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    // A bad device becomes a DEVICE location with a bad id: INVALID_DEVICE
    // where the advice takes a location.
    const CUmemLocation loc = from_v1_device(device);
    CUmemLocation logged = loc;
    if (device != CU_DEVICE_CPU && !fake::valid_device(st, device)) {
        // Ignored by the advice that takes no location; logged as given.
        logged.type = CU_MEM_LOCATION_TYPE_INVALID;
        logged.id = device;
    }
    return advise(st, __func__, devPtr, count, fake::raw(advice), loc, logged);
}

#if FAKE_HAS(12020)
FAKE_API CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                                         CUmemLocation location) {
    FAKE_ENTER(fake::kNeedsInit);
    return advise(fake::state(), __func__, devPtr, count, fake::raw(advice), location, location);
}
#endif

// ---- prefetch ---------------------------------------------------------------------------------------------

FAKE_API CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return prefetch_v1(__func__, devPtr, count, dstDevice, hStream, false);
}

FAKE_API CUresult CUDAAPI cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                                  CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return prefetch_v1(__func__, devPtr, count, dstDevice, hStream, true);
}

#if FAKE_HAS(12020)
FAKE_API CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                                unsigned int flags, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return prefetch_v2(__func__, devPtr, count, location, flags, hStream, false);
}

FAKE_API CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                                     unsigned int flags, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return prefetch_v2(__func__, devPtr, count, location, flags, hStream, true);
}
#endif

#if FAKE_HAS(13000)
FAKE_API CUresult CUDAAPI cuMemPrefetchBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                                  CUmemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                                  size_t numPrefetchLocs, unsigned long long flags,
                                                  CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return prefetch_batch(__func__, false, dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs,
                          flags, hStream);
}

FAKE_API CUresult CUDAAPI cuMemPrefetchBatchAsync_ptsz(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                                       CUmemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                                       size_t numPrefetchLocs, unsigned long long flags,
                                                       CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return prefetch_batch(__func__, true, dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs,
                          flags, hStream);
}
#endif

// ---- discard -----------------------------------------------------------------------------------------------

#if FAKE_HAS(13000)
FAKE_API CUresult CUDAAPI cuMemDiscardBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                                 unsigned long long flags, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return discard_batch(false, dptrs, sizes, count, flags, hStream);
}

FAKE_API CUresult CUDAAPI cuMemDiscardBatchAsync_ptsz(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                                      unsigned long long flags, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return discard_batch(true, dptrs, sizes, count, flags, hStream);
}

// The discard, then the prefetch, checked whole before either is queued.
namespace {
CUresult discard_and_prefetch(const char* entry, bool per_thread_entry, CUdeviceptr* dptrs, size_t* sizes,
                              size_t count, CUmemLocation* locs, size_t* locIdxs, size_t numLocs,
                              unsigned long long flags, CUstream s) {
    State& st = fake::state();
    if (!locs || !locIdxs || numLocs == 0 || numLocs > count) return CUDA_ERROR_INVALID_VALUE;
    std::vector<Span> spans(count);
    size_t k = 0;
    for (size_t i = 0; i < count && dptrs && sizes; ++i) {
        while (k + 1 < numLocs && locIdxs[k + 1] <= i) ++k;
        if (CUresult rc = prefetch_check(st, dptrs[i], sizes[i], locs[k], &spans[i])) return rc;
    }
    if (CUresult rc = discard_batch(per_thread_entry, dptrs, sizes, count, flags, s)) return rc;
    return prefetch_batch(entry, per_thread_entry, dptrs, sizes, count, locs, locIdxs, numLocs, flags, s);
}
}  // namespace

FAKE_API CUresult CUDAAPI cuMemDiscardAndPrefetchBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                                            CUmemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                                            size_t numPrefetchLocs, unsigned long long flags,
                                                            CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return discard_and_prefetch(__func__, false, dptrs, sizes, count, prefetchLocs, prefetchLocIdxs,
                                numPrefetchLocs, flags, hStream);
}

FAKE_API CUresult CUDAAPI cuMemDiscardAndPrefetchBatchAsync_ptsz(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                                                 CUmemLocation* prefetchLocs,
                                                                 size_t* prefetchLocIdxs, size_t numPrefetchLocs,
                                                                 unsigned long long flags, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return discard_and_prefetch(__func__, true, dptrs, sizes, count, prefetchLocs, prefetchLocIdxs,
                                numPrefetchLocs, flags, hStream);
}
#endif

// ---- range attributes ----------------------------------------------------------------------------------------

FAKE_API CUresult CUDAAPI cuMemRangeGetAttribute(void* data, size_t dataSize, CUmem_range_attribute attribute,
                                                 CUdeviceptr devPtr, size_t count) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    Span span;
    if (!managed_span(st, devPtr, count, &span)) return CUDA_ERROR_INVALID_VALUE;
    auto* out = static_cast<int*>(data);
    const auto preferred = [](const PageState& ps) { return ps.preferred; };
    const auto prefetched = [](const PageState& ps) { return ps.last_prefetch; };
    switch (fake::raw(attribute)) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: {
        if (dataSize != 4) return CUDA_ERROR_INVALID_VALUE;
        bool all = true;
        for_runs(span, [&](const PageState& ps) { all = all && ps.read_mostly; });
        *out = all ? 1 : 0;
        return CUDA_SUCCESS;
    }
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
        if (dataSize != 4) return CUDA_ERROR_INVALID_VALUE;
        *out = as_v1_device(uniform(span, preferred));
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
        if (dataSize != 4) return CUDA_ERROR_INVALID_VALUE;
        *out = as_v1_device(uniform(span, prefetched));
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
        if (dataSize != sizeof(CUmemLocationType)) return CUDA_ERROR_INVALID_VALUE;
        *out = uniform(span, preferred).type;
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
        if (dataSize != 4) return CUDA_ERROR_INVALID_VALUE;
        *out = uniform(span, preferred).id;
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
        if (dataSize != sizeof(CUmemLocationType)) return CUDA_ERROR_INVALID_VALUE;
        *out = uniform(span, prefetched).type;
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
        if (dataSize != 4) return CUDA_ERROR_INVALID_VALUE;
        *out = uniform(span, prefetched).id;
        return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
        if (dataSize == 0 || dataSize % 4 != 0) return CUDA_ERROR_INVALID_VALUE;
        std::uint32_t all = ~0u;
        for_runs(span, [&](const PageState& ps) { all &= ps.accessed_by; });
        const std::size_t slots = dataSize / 4;
        std::size_t n = 0;
        for (int d = 0; d < st.device_count && n < slots; ++d) {
            if (all & (1u << d)) out[n++] = d;
        }
        if ((all & PageState::kHostBit) && n < slots) out[n++] = CU_DEVICE_CPU;
        while (n < slots) out[n++] = CU_DEVICE_INVALID;
        return CUDA_SUCCESS;
    }
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}
