// fakecuda_managed_attach.cpp — cuStreamAttachMemAsync: a managed
// allocation's stream association, changed in stream order, and what it lets
// the host touch on a device without concurrent managed access (the rules
// cuda.h documents; a real device faults the host access, the fake answers
// fakecuda_host_may_touch instead).
//
//   * refused at the call: no context (INVALID_CONTEXT), a bad stream
//     (INVALID_HANDLE), flags other than GLOBAL / HOST / SINGLE, SINGLE on
//     the legacy default stream (0 on the legacy entry, CU_STREAM_LEGACY), a
//     length other than 0 or the allocation's size, an address that is not
//     the start of a managed allocation, pageable memory unless the device
//     reports PAGEABLE_MEMORY_ACCESS (INVALID_VALUE; the fake keeps no
//     association for pageable memory);
//   * the association changes when the stream reaches the call.
// Not modelled: a destroyed stream handing its allocations back their
// allocation-time association (they keep SINGLE on the dead stream).
#include "fake_state.hpp"

#include <map>

namespace {

using fake::State;

struct Association {
    unsigned flags = CU_MEM_ATTACH_GLOBAL;
    std::shared_ptr<fake::Queue> queue;  // SINGLE: the stream's work
};

// Keyed by buffer id (an address may be reused by a later allocation).
std::map<unsigned long long, Association>& associations() {
    static auto* all = new std::map<unsigned long long, Association>();  // never destroyed, as the state
    return *all;
}

CUresult attach(CUstream stream, CUdeviceptr dptr, size_t length, unsigned flags, bool per_thread) {
    State& st = fake::state();
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = fake::stream_queue(st, stream, per_thread, &queue)) return rc;
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST && flags != CU_MEM_ATTACH_SINGLE)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags == CU_MEM_ATTACH_SINGLE && queue->legacy) return CUDA_ERROR_INVALID_VALUE;
    const auto p = static_cast<std::uintptr_t>(dptr);
    fake::Allocation* a = fake::find_allocation(st, p, 0);
    if (a == nullptr || a->kind != fake::Kind::Managed) {
        // System-allocated pageable memory: only where the device reads it.
        if (a == nullptr && p != 0 && length != 0 &&
            fake::attribute(st, queue->ctx->device, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS) != 0)
            return CUDA_SUCCESS;
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (a->base != p || (length != 0 && length != a->size)) return CUDA_ERROR_INVALID_VALUE;
    const unsigned long long id = a->buffer_id;
    Association next{flags, flags == CU_MEM_ATTACH_SINGLE ? queue : nullptr};
    fake::enqueue(st, queue, [id, next](State&) {
        associations()[id] = next;
        return CUDA_SUCCESS;
    });
    return CUDA_SUCCESS;
}

}  // namespace

FAKE_API CUresult CUDAAPI cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length,
                                                 unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return attach(hStream, dptr, length, flags, false);
}

FAKE_API CUresult CUDAAPI cuStreamAttachMemAsync_ptsz(CUstream hStream, CUdeviceptr dptr, size_t length,
                                                      unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return attach(hStream, dptr, length, flags, true);
}

// The association in effect (CU_MEM_ATTACH_*; the allocation's flags until an
// attachment ran), or -1 when `ptr` is not the start of a managed allocation.
FAKE_API int fakecuda_managed_attachment(unsigned long long ptr) {
    State& st = fake::state();
    std::lock_guard<std::mutex> lock(st.mu);
    fake::Allocation* a = fake::find_allocation(st, static_cast<std::uintptr_t>(ptr), 0);
    if (a == nullptr || a->kind != fake::Kind::Managed || a->base != ptr) return -1;
    auto it = associations().find(a->buffer_id);
    return static_cast<int>(it != associations().end() ? it->second.flags : a->flags);
}

// Whether the host may touch the managed allocation at `ptr` now, on a device
// without concurrent managed access: HOST always; SINGLE once its stream has
// no work left; GLOBAL once no stream of the allocation's context has.
// -1 when `ptr` is not the start of a managed allocation.
FAKE_API int fakecuda_host_may_touch(unsigned long long ptr) {
    State& st = fake::state();
    std::lock_guard<std::mutex> lock(st.mu);
    fake::Allocation* a = fake::find_allocation(st, static_cast<std::uintptr_t>(ptr), 0);
    if (a == nullptr || a->kind != fake::Kind::Managed || a->base != ptr) return -1;
    auto it = associations().find(a->buffer_id);
    const unsigned flags = it != associations().end() ? it->second.flags : a->flags;
    if (flags == CU_MEM_ATTACH_HOST) return 1;
    if (flags == CU_MEM_ATTACH_SINGLE) return it->second.queue->pending.empty() ? 1 : 0;
    return fake::context_busy(st, a->ctx) ? 0 : 1;
}
