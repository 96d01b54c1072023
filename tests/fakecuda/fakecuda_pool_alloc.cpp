// fakecuda_pool_alloc.cpp — stream-ordered allocation (cuMemAllocAsync,
// cuMemAllocFromPoolAsync, cuMemFreeAsync): blocks carved from a pool's
// chunks, frees that take effect in stream order, the reuse rules, and the
// hooks through which copies, frees and synchronizations of the other sources
// see pool memory (fake_state.hpp). README.md describes the model.
#include "fake_pools.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace fake::mempool {

namespace {

// A stream-ordered free has run: what it released goes.
void complete(State& st, std::map<unsigned long long, Retiring>::iterator it) {
    Retiring& r = it->second;
    Pool* pool = r.pool;
    if (pool == nullptr) {
        fake::release_allocation(st, r.detached);
    } else if (r.imported) {
        release_imported_block(pool, it->first, r.mapping, r.mapping_size);
    }
    pools().retiring.erase(it);
    if (pool != nullptr) {
        --pool->pending;
        maybe_destroy(st, pool);
    }
}

// A block left State::allocs (cuMemFree, cuMemFreeAsync): back to its pool,
// tagged with the free's position in its stream when there is one.
void free_block(State& st, const Allocation& a, const Dependency* at) {
    Pool* pool = a.pool;
    --pool->blocks;
    if (pool->imported) {
        pool->used -= std::min<std::uint64_t>(pool->used, a.size);
        pool->reserved -= std::min<std::uint64_t>(pool->reserved, a.mapping_size);
        if (at == nullptr) {
            release_imported_block(pool, a.buffer_id, a.mapping, a.mapping_size);
            maybe_destroy(st, pool);
            return;
        }
        Retiring r;
        r.pool = pool;
        r.base = a.base;
        r.size = a.size;
        r.free_at = *at;
        r.imported = true;
        r.mapping = a.mapping;
        r.mapping_size = a.mapping_size;
        pools().retiring.emplace(a.buffer_id, std::move(r));
        ++pool->pending;
        return;
    }
    auto seg = pool->segments.find(a.base);
    if (seg != pool->segments.end()) {
        pool->used -= std::min<std::uint64_t>(pool->used, seg->second.size);
        seg->second.block = 0;
        seg->second.tag = FreeTag{};
        if (at != nullptr) {
            seg->second.tag.queue = at->queue;
            seg->second.tag.serial = at->queue->serial;
            seg->second.tag.seq = at->seq;
        }
        retire_slot(pool, a.base, seg->second);
    }
    if (at != nullptr) {
        Retiring r;
        r.pool = pool;
        r.base = a.base;
        r.size = a.size;
        r.free_at = *at;
        pools().retiring.emplace(a.buffer_id, std::move(r));
        ++pool->pending;
    }
    coalesce(pool);
    maybe_destroy(st, pool);
}

}  // namespace

void sweep(State& st) {
    auto& retiring = pools().retiring;
    for (auto it = retiring.begin(); it != retiring.end();) {
        auto next = std::next(it);
        if (fake::finished(it->second.free_at)) complete(st, it);
        it = next;
    }
    for (Pool* pool : pools().all) release_quarantined(pool);
}

}  // namespace fake::mempool

using namespace fake::mempool;
using fake::Allocation;
using fake::Dependency;
using fake::Kind;
using fake::Queue;
using fake::State;

// ---- hooks of fake_state.hpp (every variant) -------------------------------------------------------

namespace fake {

unsigned long long device_block_id(State& st, std::uintptr_t p) {
    const Allocation* a = find_allocation(st, p, 0);
    return a != nullptr && (a->kind == Kind::Pool || a->kind == Kind::Device) ? a->buffer_id : 0;
}

void* block_bytes(State& st, std::uintptr_t p, std::size_t n, unsigned long long id) {
    if (const Allocation* a = find_allocation(st, p, n); a != nullptr && a->buffer_id == id)
        return reinterpret_cast<void*>(p);
    // Freed by cuMemFreeAsync, the free not yet reached in its stream.
    auto it = pools().retiring.find(id);
    if (it == pools().retiring.end() || finished(it->second.free_at)) return nullptr;
    const Retiring& r = it->second;
    if (p < r.base || p - r.base >= r.size || n > r.size - (p - r.base)) return nullptr;
    return reinterpret_cast<void*>(p);
}

bool pool_address(State&, std::uintptr_t p) {
    const auto& ranges = pools().chunk_ranges;
    auto it = ranges.upper_bound(p);
    if (it == ranges.begin()) return false;
    --it;
    return p - it->first < it->second;
}

bool pool_on_host(const CUmemPoolHandle_st* pool) {
    return pool != nullptr && pool->location_type != CU_MEM_LOCATION_TYPE_DEVICE;
}

void pool_block_mapping(const Allocation& block, std::uintptr_t* base, std::size_t* size) {
    const Pool* pool = block.pool;
    if (block.kind != Kind::Pool || pool == nullptr) return;
    if (pool->imported) {
        *base = reinterpret_cast<std::uintptr_t>(block.mapping);
        *size = block.mapping_size;
        return;
    }
    auto chunk = pool->chunks.upper_bound(block.base);
    if (chunk == pool->chunks.begin()) return;
    --chunk;
    *base = chunk->first;
    *size = chunk->second.size;
}

CUresult pool_free_now(State& st, std::uintptr_t base) {
    sweep(st);
    auto it = st.allocs.find(base);
    if (it == st.allocs.end() || it->second.kind != Kind::Pool) return CUDA_ERROR_INVALID_VALUE;
    const Allocation a = std::move(it->second);
    st.allocs.erase(it);
    free_block(st, a, nullptr);
    return CUDA_SUCCESS;
}

void pools_synchronized(State& st, const std::function<bool(const Queue*, std::uint64_t)>& covered) {
    sweep(st);
    for (Pool* pool : std::vector<Pool*>(pools().all.begin(), pools().all.end())) {
        // Frees the synchronization saw done are free for every stream now.
        for (auto& kv : pool->segments) {
            FreeTag& tag = kv.second.tag;
            if (!tag.pending() || !tag_done(tag)) continue;
            const std::shared_ptr<Queue> queue = tag.queue.lock();
            if (!queue || covered(queue.get(), tag.seq)) tag = FreeTag{};
        }
        coalesce(pool);
        if (releases_memory(pool) && pool->reserved > pool->release_threshold)
            release_free_chunks(st, pool, pool->release_threshold);
    }
}

void pools_context_destroyed(State& st) { sweep(st); }

}  // namespace fake

// ---- entry points -----------------------------------------------------------------------------------

#if FAKE_HAS(11020)

namespace {

constexpr std::size_t kBlockAlignment = fake::kDeviceAlignment;

// Whether a free piece may serve an allocation on `queue` now (without
// waiting for another stream).
bool reusable(const Pool* pool, const Segment& seg, const Queue& queue) {
    if (seg.block != 0 || seg.quarantine >= 0) return false;
    const FreeTag& tag = seg.tag;
    if (!tag.pending() || tag.serial == queue.serial) return true;  // free for all, or freed on this stream
    if (pool->follow_events) {
        auto waited = queue.waited.find(tag.serial);
        if (waited != queue.waited.end() && waited->second >= tag.seq) return true;
    }
    return pool->opportunistic && tag_done(tag);
}

CUresult allocate_block(State& st, Pool* pool, std::size_t bytes, const std::shared_ptr<Queue>& queue,
                        CUdeviceptr* out) {
    // Nothing larger than a device's memory (the rounding below cannot wrap then).
    if (bytes > fake::kTotalMemory) return CUDA_ERROR_OUT_OF_MEMORY;
    const std::size_t need = round_up(bytes, kBlockAlignment);
    auto& segments = pool->segments;
    auto found = segments.end();
    for (auto it = segments.begin(); it != segments.end() && found == segments.end(); ++it)
        if (it->second.size >= need && reusable(pool, it->second, *queue)) found = it;
    if (found == segments.end()) found = reserve_chunk(st, pool, need);
    std::vector<Dependency> after;
    if (found == segments.end() && pool->internal_dependencies) {
        // The pool cannot grow: take memory another stream's free will
        // release, this stream waiting for that free from here on.
        for (auto it = segments.begin(); it != segments.end(); ++it) {
            const Segment& seg = it->second;
            if (seg.block != 0 || seg.quarantine >= 0 || seg.size < need || !seg.tag.pending()) continue;
            const std::shared_ptr<Queue> other = seg.tag.queue.lock();
            if (other) after.push_back({other, seg.tag.seq});
            found = it;
            break;
        }
    }
    if (found == segments.end()) return CUDA_ERROR_OUT_OF_MEMORY;

    // The allocation in stream order (the emulated device has nothing to do then).
    fake::enqueue(st, queue, [](State&) { return CUDA_SUCCESS; }, std::move(after));

    const std::uintptr_t base = found->first;
    Segment& seg = found->second;
    if (seg.size > need) {
        Segment rest = seg;
        rest.size = seg.size - need;
        segments.emplace(base + need, rest);
        seg.size = need;
    }
    seg.tag = FreeTag{};
    seg.block = st.next_buffer_id++;

    Allocation a;
    a.base = base;
    a.size = bytes;
    a.kind = Kind::Pool;
    a.device = pool->device >= 0 ? pool->device : 0;
    a.ctx = nullptr;  // stream-ordered allocations belong to no context
    a.buffer_id = seg.block;
    a.pool = pool;
    a.allowed_handle_types = pool->handle_types;
    st.allocs.emplace(base, std::move(a));
    pool->used += need;
    ++pool->blocks;
    note_usage(pool);
    *out = static_cast<CUdeviceptr>(base);
    return CUDA_SUCCESS;
}

CUresult alloc_async(CUdeviceptr* out, std::size_t bytes, Pool* pool, bool from_pool, CUstream stream,
                     bool per_thread) {
    State& st = fake::state();
    sweep(st);
    if (!out || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Queue> queue;
    if (CUresult rc = fake::stream_queue(st, stream, per_thread, &queue)) return rc;
    if (from_pool) {
        // Imported pools cannot allocate (the guide's import-pool limitations).
        if (!live_pool(pool) || pool->imported) return CUDA_ERROR_INVALID_VALUE;
        if (pool->device >= 0) {
            if (CUresult rc = check_pools_supported(st, pool->device)) return rc;
        }
    } else {
        // The current pool of the stream's device, whatever the current context.
        const int device = queue->ctx->device;
        if (CUresult rc = check_pools_supported(st, device)) return rc;
        pool = current_pool({CU_MEM_LOCATION_TYPE_DEVICE, device});
    }
    return allocate_block(st, pool, bytes, queue, out);
}

CUresult free_async(CUdeviceptr dptr, CUstream stream, bool per_thread) {
    State& st = fake::state();
    sweep(st);
    std::shared_ptr<Queue> queue;
    if (CUresult rc = fake::stream_queue(st, stream, per_thread, &queue)) return rc;
    if (dptr == 0) return CUDA_SUCCESS;
    auto it = st.allocs.find(static_cast<std::uintptr_t>(dptr));
    if (it == st.allocs.end() || (it->second.kind != Kind::Pool && it->second.kind != Kind::Device))
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned long long id = it->second.buffer_id;
    // The free in stream order: what it releases goes when it has run.
    const Dependency at = fake::enqueue(st, queue, [id](State& s) {
        auto retiring = pools().retiring.find(id);
        if (retiring != pools().retiring.end()) complete(s, retiring);
        return CUDA_SUCCESS;
    });
    Allocation a = std::move(it->second);
    st.allocs.erase(it);
    if (a.kind == Kind::Pool) {
        free_block(st, a, &at);
    } else {
        // cuMemAlloc memory freed in stream order (the guide allows it).
        Retiring r;
        r.base = a.base;
        r.size = a.size;
        r.free_at = at;
        r.detached = std::move(a);
        pools().retiring.emplace(id, std::move(r));
    }
    return CUDA_SUCCESS;
}

}  // namespace

FAKE_API CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return alloc_async(dptr, bytesize, nullptr, false, hStream, false);
}

FAKE_API CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return alloc_async(dptr, bytesize, nullptr, false, hStream, true);
}

FAKE_API CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                                  CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return alloc_async(dptr, bytesize, pool, true, hStream, false);
}

FAKE_API CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                                       CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return alloc_async(dptr, bytesize, pool, true, hStream, true);
}

FAKE_API CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return free_async(dptr, hStream, false);
}

FAKE_API CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return free_async(dptr, hStream, true);
}

#endif  // FAKE_HAS(11020)
