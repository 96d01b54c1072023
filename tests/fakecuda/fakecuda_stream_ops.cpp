// fakecuda_stream_ops.cpp — stream memory operations (cuStreamWriteValue32/64,
// cuStreamWaitValue32/64, cuStreamBatchMemOp), both ABIs, as stream work:
//
//   * the 11.7 ABI (the _v2 symbols, what cuda.h 12+ means by the plain
//     names): always available; 64-bit operations need
//     CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS and the NOR wait
//     CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR (NOT_SUPPORTED
//     otherwise); CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER is refused
//     (cuda.h: "not supported in the v2 API");
//   * the 8.0 / 9.0 ABI (unsuffixed): NOT_SUPPORTED unless the device's
//     CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1 is set (the fake sets it
//     only on drivers without the 11.7 ABI), 64-bit and NOR behind the _V1
//     attributes;
//   * refused at the call with INVALID_VALUE: an address that is not device
//     memory of the current context's reach (device, pinned or registered
//     host memory through its device address, VMM, IPC-opened), managed
//     memory (cuda.h: none of the operations accepts it), pool memory (the
//     real driver refuses it; see check_op), an address
//     not aligned to the value's size, unknown wait conditions or flag bits,
//     FLUSH without CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES (NOT_SUPPORTED),
//     a batch of 0 or 256+ operations, batch flags other than 0;
//   * a write runs in stream order; a wait holds its stream (and what is
//     ordered after it) until the condition holds, re-read every millisecond
//     because the host and other streams write without telling the worker.
//     FAKECUDA_STREAM_WAIT_TIMEOUT_MS (default 10000) bounds a wait: past
//     it the context fails with CUDA_ERROR_LAUNCH_TIMEOUT, so a test cannot
//     hang (a real wait waits for ever).
#include "fake_state.hpp"

#include <memory>
#include <vector>

namespace {

using fake::State;

[[maybe_unused]] constexpr bool kLegacy = false;
[[maybe_unused]] constexpr bool kPerThread = true;  // unused where the variant has no _v2 entries (legacy)

enum class Abi { V1, V2 };

struct Op {
    CUstreamBatchMemOpType type = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    std::uintptr_t address = 0;
    unsigned long long block = 0;  // the device block found at the call (0: other memory)
    std::uint64_t value = 0;
    unsigned flags = 0;
};

bool is_64(CUstreamBatchMemOpType t) {
    return t == CU_STREAM_MEM_OP_WAIT_VALUE_64 || t == CU_STREAM_MEM_OP_WRITE_VALUE_64;
}
bool is_wait(CUstreamBatchMemOpType t) {
    return t == CU_STREAM_MEM_OP_WAIT_VALUE_32 || t == CU_STREAM_MEM_OP_WAIT_VALUE_64;
}

// The bytes of an operation when it runs; nullptr when the memory is gone.
void* locate(State& st, const Op& op) {
    const std::size_t n = is_64(op.type) ? 8 : 4;
    if (op.block != 0) return fake::block_bytes(st, op.address, n, op.block);
    return fake::resolve_device(st, op.address, n);
}

bool condition_holds(const Op& op, std::uint64_t now) {
    const unsigned condition = op.flags & ~static_cast<unsigned>(CU_STREAM_WAIT_VALUE_FLUSH);
    const bool wide = is_64(op.type);
    const std::uint64_t mask = wide ? ~std::uint64_t{0} : 0xFFFFFFFFull;
    now &= mask;
    const std::uint64_t value = op.value & mask;
    switch (condition) {
        case CU_STREAM_WAIT_VALUE_GEQ:
            return wide ? static_cast<std::int64_t>(now - value) >= 0
                        : static_cast<std::int32_t>(static_cast<std::uint32_t>(now - value)) >= 0;
        case CU_STREAM_WAIT_VALUE_EQ: return now == value;
        case CU_STREAM_WAIT_VALUE_AND: return (now & value) != 0;
        case CU_STREAM_WAIT_VALUE_NOR: return (~(now | value) & mask) != 0;
        default: return false;
    }
}

std::uint64_t load(const void* where, bool wide) {
    if (wide) return __atomic_load_n(static_cast<const std::uint64_t*>(where), __ATOMIC_ACQUIRE);
    return __atomic_load_n(static_cast<const std::uint32_t*>(where), __ATOMIC_ACQUIRE);
}

void store(void* where, std::uint64_t value, bool wide) {
    if (wide)
        __atomic_store_n(static_cast<std::uint64_t*>(where), value, __ATOMIC_RELEASE);
    else
        __atomic_store_n(static_cast<std::uint32_t*>(where), static_cast<std::uint32_t>(value), __ATOMIC_RELEASE);
}

// Checks one operation at the call; fills `op`.
CUresult check_op(State& st, int device, Abi abi, CUstreamBatchMemOpType type, CUdeviceptr address,
                  std::uint64_t value, unsigned flags, Op* op) {
    const bool wide = is_64(type);
    const auto attr = [&](CUdevice_attribute a) { return fake::attribute(st, device, a) != 0; };
    if (wide && !attr(abi == Abi::V2 ? CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS
                                     : CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1))
        return CUDA_ERROR_NOT_SUPPORTED;
    if (is_wait(type)) {
        const unsigned condition = flags & ~static_cast<unsigned>(CU_STREAM_WAIT_VALUE_FLUSH);
        if (condition > CU_STREAM_WAIT_VALUE_NOR) return CUDA_ERROR_INVALID_VALUE;
        if (condition == CU_STREAM_WAIT_VALUE_NOR &&
            !attr(abi == Abi::V2 ? CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR
                                 : CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1))
            return CUDA_ERROR_NOT_SUPPORTED;
        if ((flags & CU_STREAM_WAIT_VALUE_FLUSH) != 0 && !attr(CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES))
            return CUDA_ERROR_NOT_SUPPORTED;
    } else {
        const unsigned known = abi == Abi::V1 ? static_cast<unsigned>(CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) : 0u;
        if ((flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
    }
    const std::size_t n = wide ? 8 : 4;
    const auto p = static_cast<std::uintptr_t>(address);
    if (p == 0 || p % n != 0) return CUDA_ERROR_INVALID_VALUE;
    fake::Allocation* which = nullptr;
    if (fake::resolve_device(st, p, n, &which) == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (which != nullptr && which->kind == fake::Kind::Managed) return CUDA_ERROR_INVALID_VALUE;
    // Pool memory: driver 580 answered INVALID_VALUE to cuStreamWriteValue32
    // naming memory of the default pool or of a created device pool (after a
    // synchronize too), and ran it on cuMemAlloc memory. Every pool block is
    // refused, by every operation (the others, host pools and imported
    // pointers were not measured apart).
    if (which != nullptr && which->kind == fake::Kind::Pool) return CUDA_ERROR_INVALID_VALUE;
    op->type = type;
    op->address = p;
    op->block = fake::device_block_id(st, p);
    op->value = wide ? value : (value & 0xFFFFFFFFull);
    op->flags = flags;
    return CUDA_SUCCESS;
}

// Enqueues the operations in order: each wait is a piece of work of its own
// (it holds what follows it), consecutive writes share the piece after it.
CUresult submit(State& st, const std::shared_ptr<fake::Queue>& queue, const std::vector<Op>& ops) {
    for (const Op& op : ops) {
        fake::Task task = [op](State& s) -> CUresult {
            void* where = locate(s, op);
            if (where == nullptr) return CUDA_ERROR_ILLEGAL_ADDRESS;
            if (!is_wait(op.type)) store(where, op.value, is_64(op.type));
            return CUDA_SUCCESS;
        };
        const fake::Dependency work = fake::enqueue(st, queue, std::move(task));
        if (is_wait(op.type)) {
            // The condition, polled by the worker (see Work::until); memory
            // found gone lets the work run, which then fails the context.
            fake::Work& enqueued = queue->pending.back();
            (void)work;
            enqueued.until = [op](State& s) {
                void* where = locate(s, op);
                return where == nullptr || condition_holds(op, load(where, is_64(op.type)));
            };
        }
    }
    return CUDA_SUCCESS;
}

CUresult stream_device(State& st, CUstream stream, bool per_thread, std::shared_ptr<fake::Queue>* queue,
                       int* device) {
    if (CUresult rc = fake::stream_queue(st, stream, per_thread, queue)) return rc;
    *device = (*queue)->ctx->device;
    return CUDA_SUCCESS;
}

CUresult single(CUstream stream, CUstreamBatchMemOpType type, CUdeviceptr address, std::uint64_t value,
                unsigned flags, Abi abi, bool per_thread) {
    State& st = fake::state();
    std::shared_ptr<fake::Queue> queue;
    int device = 0;
    if (CUresult rc = stream_device(st, stream, per_thread, &queue, &device)) return rc;
    if (abi == Abi::V1 && fake::attribute(st, device, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1) == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    Op op;
    if (CUresult rc = check_op(st, device, abi, type, address, value, flags, &op)) return rc;
    return submit(st, queue, {op});
}

CUresult batch(CUstream stream, unsigned count, CUstreamBatchMemOpParams* params, unsigned flags, Abi abi,
               bool per_thread) {
    State& st = fake::state();
    std::shared_ptr<fake::Queue> queue;
    int device = 0;
    if (CUresult rc = stream_device(st, stream, per_thread, &queue, &device)) return rc;
    if (abi == Abi::V1 && fake::attribute(st, device, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1) == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (count == 0 || count >= 256 || params == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    std::vector<Op> ops(count);
    for (unsigned i = 0; i < count; ++i) {
        const CUstreamBatchMemOpParams& p = params[i];
        switch (p.operation) {
            case CU_STREAM_MEM_OP_WAIT_VALUE_32:
            case CU_STREAM_MEM_OP_WAIT_VALUE_64: {
                const std::uint64_t v = is_64(p.operation) ? p.waitValue.value64 : p.waitValue.value;
                if (CUresult rc = check_op(st, device, abi, p.operation, p.waitValue.address, v, p.waitValue.flags,
                                           &ops[i]))
                    return rc;
                break;
            }
            case CU_STREAM_MEM_OP_WRITE_VALUE_32:
            case CU_STREAM_MEM_OP_WRITE_VALUE_64: {
                const std::uint64_t v = is_64(p.operation) ? p.writeValue.value64 : p.writeValue.value;
                if (CUresult rc = check_op(st, device, abi, p.operation, p.writeValue.address, v, p.writeValue.flags,
                                           &ops[i]))
                    return rc;
                break;
            }
            default: return CUDA_ERROR_INVALID_VALUE;  // barriers and flushes are not modelled
        }
    }
    return submit(st, queue, ops);
}

}  // namespace

// ---- the 8.0 / 9.0 ABI -------------------------------------------------------------------------

FAKE_API CUresult CUDAAPI cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                               unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return single(stream, CU_STREAM_MEM_OP_WRITE_VALUE_32, addr, value, flags, Abi::V1, kLegacy);
}
FAKE_API CUresult CUDAAPI cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return single(stream, CU_STREAM_MEM_OP_WAIT_VALUE_32, addr, value, flags, Abi::V1, kLegacy);
}
FAKE_API CUresult CUDAAPI cuStreamWriteValue64(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                               unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return single(stream, CU_STREAM_MEM_OP_WRITE_VALUE_64, addr, value, flags, Abi::V1, kLegacy);
}
FAKE_API CUresult CUDAAPI cuStreamWaitValue64(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return single(stream, CU_STREAM_MEM_OP_WAIT_VALUE_64, addr, value, flags, Abi::V1, kLegacy);
}
FAKE_API CUresult CUDAAPI cuStreamBatchMemOp(CUstream stream, unsigned int count, CUstreamBatchMemOpParams* paramArray,
                                             unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return batch(stream, count, paramArray, flags, Abi::V1, kLegacy);
}

// ---- the 11.7 ABI --------------------------------------------------------------------------------

#if FAKE_HAS(11070)
FAKE_API CUresult CUDAAPI cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                                  unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return single(stream, CU_STREAM_MEM_OP_WRITE_VALUE_32, addr, value, flags, Abi::V2, kLegacy);
}
FAKE_API CUresult CUDAAPI cuStreamWriteValue32_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                                       unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return single(stream, CU_STREAM_MEM_OP_WRITE_VALUE_32, addr, value, flags, Abi::V2, kPerThread);
}
FAKE_API CUresult CUDAAPI cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                                 unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return single(stream, CU_STREAM_MEM_OP_WAIT_VALUE_32, addr, value, flags, Abi::V2, kLegacy);
}
FAKE_API CUresult CUDAAPI cuStreamWaitValue32_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                                      unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return single(stream, CU_STREAM_MEM_OP_WAIT_VALUE_32, addr, value, flags, Abi::V2, kPerThread);
}
FAKE_API CUresult CUDAAPI cuStreamWriteValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                                  unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return single(stream, CU_STREAM_MEM_OP_WRITE_VALUE_64, addr, value, flags, Abi::V2, kLegacy);
}
FAKE_API CUresult CUDAAPI cuStreamWriteValue64_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                                       unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return single(stream, CU_STREAM_MEM_OP_WRITE_VALUE_64, addr, value, flags, Abi::V2, kPerThread);
}
FAKE_API CUresult CUDAAPI cuStreamWaitValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                                 unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return single(stream, CU_STREAM_MEM_OP_WAIT_VALUE_64, addr, value, flags, Abi::V2, kLegacy);
}
FAKE_API CUresult CUDAAPI cuStreamWaitValue64_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                                      unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return single(stream, CU_STREAM_MEM_OP_WAIT_VALUE_64, addr, value, flags, Abi::V2, kPerThread);
}
FAKE_API CUresult CUDAAPI cuStreamBatchMemOp_v2(CUstream stream, unsigned int count,
                                                CUstreamBatchMemOpParams* paramArray, unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return batch(stream, count, paramArray, flags, Abi::V2, kLegacy);
}
FAKE_API CUresult CUDAAPI cuStreamBatchMemOp_v2_ptsz(CUstream stream, unsigned int count,
                                                     CUstreamBatchMemOpParams* paramArray, unsigned int flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return batch(stream, count, paramArray, flags, Abi::V2, kPerThread);
}
#endif

// ---- the knob's setter ---------------------------------------------------------------------------

FAKE_API void fakecuda_set_stream_wait_timeout_ms(unsigned int ms) {
    State& st = fake::state();
    std::lock_guard<std::mutex> lock(st.mu);
    st.stream_wait_timeout_ms = ms == 0 ? 1 : ms;
    st.work.notify_all();
}
