// fakecuda_peer.cpp — peer access between contexts and the P2P attributes
// of a device pair. Whether device a reaches device b is the per-pair switch
// st.peer[a][b] (every pair of distinct devices by default;
// fakecuda_set_peer_access changes it); the access a context
// enabled is a record per (context, peer context) pair that goes with either
// context. Copies between devices need no peer access (the driver stages
// them), so only the record and the answers are modelled.
#include "fake_state.hpp"
#include "fake_enum.hpp"

#include <iterator>

using fake::State;

namespace fake {

void peer_context_destroyed(State& st, CUctx_st* ctx) {
    for (auto it = st.peer_enabled.begin(); it != st.peer_enabled.end();)
        it = (it->first == ctx || it->second == ctx) ? st.peer_enabled.erase(it) : std::next(it);
}

}  // namespace fake

namespace {

// The current context and a live peer context, as both entries check them.
CUresult peer_pair(State& st, CUcontext peer, CUctx_st** current) {
    CUctx_st* ctx = fake::current_context(st);
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    if (!peer || !fake::known_context(st, peer) || peer->refcount <= 0 || peer == ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    *current = ctx;
    return CUDA_SUCCESS;
}

}  // namespace

FAKE_API CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    CUctx_st* ctx = nullptr;
    if (CUresult rc = peer_pair(st, peerContext, &ctx)) return rc;
    if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (ctx->device == peerContext->device || st.peer[ctx->device][peerContext->device] == 0)
        return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    if (!st.peer_enabled.insert({ctx, peerContext}).second) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peerContext) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    CUctx_st* ctx = nullptr;
    if (CUresult rc = peer_pair(st, peerContext, &ctx)) return rc;
    if (st.peer_enabled.erase({ctx, peerContext}) == 0) return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    return CUDA_SUCCESS;
}

// A pair that can reach each other reports access, native atomics and array
// access, with performance rank 0 (one link kind); a pair that cannot
// reports 0 for all. The same device twice is INVALID_DEVICE.
FAKE_API CUresult CUDAAPI cuDeviceGetP2PAttribute(int* value, CUdevice_P2PAttribute attrib, CUdevice srcDevice,
                                                  CUdevice dstDevice) {
    FAKE_ENTER(fake::kDeviceLevel);
    State& st = fake::state();
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::valid_device(st, srcDevice) || !fake::valid_device(st, dstDevice) || srcDevice == dstDevice)
        return CUDA_ERROR_INVALID_DEVICE;
    const int can = st.peer[srcDevice][dstDevice] != 0 ? 1 : 0;
    switch (attrib) {
        case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK: *value = 0; return CUDA_SUCCESS;
        case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
        case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
        case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED: *value = can; return CUDA_SUCCESS;
        default: return CUDA_ERROR_INVALID_VALUE;
    }
}

#if FAKE_HAS(13000)
// Per operation, what the link does natively: a pair that can reach each
// other has every integer operation signed and unsigned on 32 and 64 bits,
// the float ones on 32 and 64 bits; a pair that cannot, nothing. An
// operation past the enum, a zero count or a null array is INVALID_VALUE.
FAKE_API CUresult CUDAAPI cuDeviceGetP2PAtomicCapabilities(unsigned int* capabilities,
                                                           const CUatomicOperation* operations, unsigned int count,
                                                           CUdevice srcDevice, CUdevice dstDevice) {
    FAKE_ENTER(fake::kDeviceLevel);
    State& st = fake::state();
    if (!capabilities || !operations || count == 0) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::valid_device(st, srcDevice) || !fake::valid_device(st, dstDevice) || srcDevice == dstDevice)
        return CUDA_ERROR_INVALID_DEVICE;
    for (unsigned int i = 0; i < count; ++i)
        if (fake::raw(operations[i]) < 0 || fake::raw(operations[i]) >= CU_ATOMIC_OPERATION_MAX)
            return CUDA_ERROR_INVALID_VALUE;
    const bool can = st.peer[srcDevice][dstDevice] != 0;
    for (unsigned int i = 0; i < count; ++i) {
        const bool is_float = operations[i] >= CU_ATOMIC_OPERATION_FLOAT_ADD;
        const unsigned int sizes = CU_ATOMIC_CAPABILITY_SCALAR_32 | CU_ATOMIC_CAPABILITY_SCALAR_64;
        capabilities[i] =
            can ? (is_float ? sizes : sizes | CU_ATOMIC_CAPABILITY_SIGNED | CU_ATOMIC_CAPABILITY_UNSIGNED) : 0u;
    }
    return CUDA_SUCCESS;
}
#endif

FAKE_API void fakecuda_set_small_alloc_offset(unsigned bytes) {
    State& st = fake::state();
    std::lock_guard<std::mutex> lock{st.mu};
    st.small_alloc_offset = bytes < fake::kPageSize ? bytes : 0;
}
