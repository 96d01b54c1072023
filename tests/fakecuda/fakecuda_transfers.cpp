// fakecuda_transfers.cpp — copies, sets and copy batches as stream work: a
// call checks its addresses at once (INVALID_VALUE outside tracked memory)
// and enqueues the work, which finds its memory again when it runs (memory
// gone by then fails the context with ILLEGAL_ADDRESS). When the call returns
// follows the driver's synchronization rules (below).
#include "fake_state.hpp"
#include "fake_enum.hpp"
#include "fake_pools.hpp"
#include "fake_transfer.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace fake::transfer {

Side side_of(State& st, std::uintptr_t p) {
    std::size_t offset = 0;
    if (fake::find_alias(st, p, &offset)) return Side::Pinned;  // a registered range's device address
    if (fake::vmm_check(st, p, 1) != 0) return Side::Device;
    const Allocation* a = fake::find_allocation(st, p, 0);
    if (!a) return Side::Pageable;
    switch (a->kind) {
        case Kind::Host:
        case Kind::Registered: return Side::Pinned;
        case Kind::Managed: return Side::Managed;
        case Kind::Pool: return fake::pool_on_host(a->pool) ? Side::Pinned : Side::Device;
        default: return Side::Device;
    }
}

bool on_host(Side side) { return side == Side::Pinned || side == Side::Pageable; }

// When the call returns, by the driver API's "API synchronization behavior"
// rules, as measured on an H100 with driver 580
// (docs/measurements/h100-2026-11-23-driver-facts.md):
//
//   no-stream copies  host -> host                       when done
//                     device -> host (pageable, pinned)  when done
//                     pinned host -> device              when done
//                     pageable host -> device            once the source is staged (the device write may be pending)
//                     device -> device                   at once
//   no-stream sets    device memory                      at once
//                     pinned host or managed memory      when done
//   Async copies      a pageable source                  once the source is staged
//                     a pageable destination             when done
//                     otherwise                          at once
//   Async sets                                           at once
//
// "Device" is device, VMM-mapped, IPC-opened, managed and device-pool memory
// (managed memory counts as pinned for sets); "pinned" is cuMemHostAlloc,
// registered and host-pool memory; any other address is pageable.
Returns no_stream_copy(Side destination, Side source) {
    if (on_host(destination)) return Returns::WhenDone;  // to any host memory, from anywhere
    if (source == Side::Pageable) return Returns::Staged;
    if (source == Side::Pinned) return Returns::WhenDone;
    return Returns::AtOnce;
}

Returns async_copy(Side destination, Side source) {
    if (destination == Side::Pageable) return Returns::WhenDone;
    if (source == Side::Pageable) return Returns::Staged;
    return Returns::AtOnce;
}

Returns no_stream_set(Side destination) {
    return destination == Side::Pinned || destination == Side::Managed ? Returns::WhenDone : Returns::AtOnce;
}

// With unified addressing the driver infers the kind from the address.
// Tracked allocations are bounds-checked (registered aliases translated); any
// other address is pageable host memory.
CUresult unified_operand(State& st, std::uintptr_t addr, std::size_t n, void** out) {
    std::size_t off = 0;
    if (Allocation* a = fake::find_alias(st, addr, &off)) {
        if (n > a->size - off) return CUDA_ERROR_INVALID_VALUE;
        *out = reinterpret_cast<void*>(a->base + off);
        return CUDA_SUCCESS;
    }
    if (const int vmm = fake::vmm_check(st, addr, n); vmm != 0) {
        if (vmm < 0) return CUDA_ERROR_INVALID_VALUE;
    } else if (Allocation* a = fake::find_allocation(st, addr, 0)) {
        if (n > a->size - (addr - a->base)) return CUDA_ERROR_INVALID_VALUE;
    } else if (fake::pool_address(st, addr)) {
        return CUDA_ERROR_INVALID_VALUE;  // a pool's memory outside any live block (freed)
    } else if (addr == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *out = reinterpret_cast<void*>(addr);
    return CUDA_SUCCESS;
}

// Where the operand's n bytes are now; nullptr when they are not there any more.
void* locate(State& st, const Operand& op, std::size_t n) {
    if (op.block != 0 && (op.how == Operand::How::Device || op.how == Operand::How::Unified))
        return fake::block_bytes(st, op.address, n, op.block);
    switch (op.how) {
        case Operand::How::Device: return fake::resolve_device(st, op.address, n);
        case Operand::How::Unified: {
            // Memory the driver knew at the call must still be there (not
            // taken for pageable memory at the same address).
            if (op.tracked && side_of(st, op.address) == Side::Pageable) return nullptr;
            void* where = nullptr;
            return unified_operand(st, op.address, n, &where) == CUDA_SUCCESS ? where : nullptr;
        }
        case Operand::How::Host:
            if (op.tracked && !fake::find_allocation(st, op.address, n)) return nullptr;
            return reinterpret_cast<void*>(op.address);
        case Operand::How::Staged: return op.staged->data();
    }
    return nullptr;
}

Operand device_operand(State& st, CUdeviceptr p) {
    const auto address = static_cast<std::uintptr_t>(p);
    return {Operand::How::Device, address, true, {}, fake::device_block_id(st, address)};
}

// Pinned when all n bytes lie in one pinned allocation, else pageable.
Operand host_operand(State& st, const void* p, std::size_t n) {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    return {Operand::How::Host, address, fake::find_allocation(st, address, n) != nullptr, {}};
}

Operand unified(State& st, CUdeviceptr p) {
    const auto address = static_cast<std::uintptr_t>(p);
    return {Operand::How::Unified, address, side_of(st, address) != Side::Pageable, {}, fake::device_block_id(st, address)};
}

// The queue of a call: its stream, or the default stream of a no-stream call.
// A created stream of another context than the current one is taken: driver
// 580 ran copies, sets and batches on a device-1 stream with device 0's
// context current (cudyn-driver-facts cross-context-stream), except the
// copies that unreachable_pool_block() refuses.
CUresult queue_of(State& st, CUstream stream, bool per_thread_default, std::shared_ptr<fake::Queue>* queue) {
    return fake::stream_queue(st, stream, per_thread_default, queue);
}

// A copy on a created stream of another context than the current one that
// names pool memory of another device than the current context's, in a pool
// that grants that device no access: driver 580 answered INVALID_VALUE for
// cuMemcpyHtoDAsync / cuMemcpyDtoHAsync of device-1 pool memory on a device-1
// stream with device 0's context current, and ran the same copies of
// cuMemAlloc memory and a set of the pool memory. Other copies of such memory
// were not measured and are taken.
bool unreachable_pool_block(State& st, CUstream stream, std::uintptr_t address) {
    const CUctx_st* context = fake::current_context(st);
    if (fake::is_default_stream(stream) || context == nullptr || stream->ctx == context) return false;
    Allocation* block = nullptr;
    if (fake::resolve_device(st, address, 0, &block) == nullptr || block == nullptr || block->pool == nullptr)
        return false;
    if (block->pool->device == context->device) return false;
    const auto granted = block->pool->access.find({CU_MEM_LOCATION_TYPE_DEVICE, context->device});
    return granted == block->pool->access.end() || granted->second == 0;
}

// Memory of a pool at the host or a host NUMA node: driver 580 answered
// INVALID_VALUE to cuMemcpyHtoD, cuMemcpyHtoDAsync and cuMemcpyDtoHAsync
// naming it (a pool granted to device 0), and ran cuMemcpyAsync and
// cuMemsetD32Async of it; the host read the bytes directly. The typed host
// copies name device memory: cuMemcpyDtoH is refused with them. The typed
// device-to-device copies were not measured and are taken.
bool host_pool_block(State& st, std::uintptr_t address) {
    Allocation* block = nullptr;
    if (fake::resolve_device(st, address, 0, &block) == nullptr || block == nullptr) return false;
    return block->kind == fake::Kind::Pool && fake::pool_on_host(block->pool);
}

// Enqueues the work and returns when `returns` says.
CUresult submit(State& st, const std::shared_ptr<fake::Queue>& queue, fake::Task task, Returns returns) {
    const fake::Dependency work = fake::enqueue(st, queue, std::move(task));
    if (returns == Returns::WhenDone) return fake::wait_for(st, work);
    return CUDA_SUCCESS;
}

// A copy of n bytes, both sides checked now and located again when it runs.
CUresult copy(State& st, const std::shared_ptr<fake::Queue>& queue, Operand destination, Operand source,
              std::size_t n, Returns returns) {
    if (returns == Returns::Staged) {
        void* bytes = locate(st, source, n);
        source.staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(bytes),
                                                                     static_cast<const unsigned char*>(bytes) + n);
        source.how = Operand::How::Staged;
    }
    return submit(
        st, queue,
        [destination, source, n](State& s) {
            void* to = locate(s, destination, n);
            void* from = locate(s, source, n);
            if (!to || !from) return CUDA_ERROR_ILLEGAL_ADDRESS;
            std::memmove(to, from, n);
            return CUDA_SUCCESS;
        },
        returns);
}

CUresult check_present(State& st, const Operand& op, std::size_t n) {
    return locate(st, op, n) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

}  // namespace fake::transfer

namespace {

using fake::Allocation;
using fake::Kind;
using fake::State;
using namespace fake::transfer;

// ---- the entries' bodies ------------------------------------------------------------------

CUresult memcpy_unified(CUdeviceptr dst, CUdeviceptr src, std::size_t n, CUstream stream, bool has_stream,
                        bool per_thread) {
    State& st = fake::state();
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = queue_of(st, stream, per_thread, &queue)) return rc;
    if (n == 0) return CUDA_SUCCESS;
    const Operand to = unified(st, dst);
    const Operand from = unified(st, src);
    if (check_present(st, to, n) != CUDA_SUCCESS || check_present(st, from, n) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    const Side to_side = side_of(st, to.address);
    const Side from_side = side_of(st, from.address);
    return copy(st, queue, to, from, n, has_stream ? async_copy(to_side, from_side) : no_stream_copy(to_side, from_side));
}

CUresult memcpy_htod(CUdeviceptr dst, const void* src, std::size_t n, CUstream stream, bool has_stream,
                     bool per_thread) {
    State& st = fake::state();
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = queue_of(st, stream, per_thread, &queue)) return rc;
    if (n == 0) return CUDA_SUCCESS;
    const Operand to = device_operand(st, dst);
    if (!src || check_present(st, to, n) != CUDA_SUCCESS || unreachable_pool_block(st, stream, to.address) ||
        host_pool_block(st, to.address))
        return CUDA_ERROR_INVALID_VALUE;
    const Operand from = host_operand(st, src, n);
    const Side to_side = side_of(st, to.address);
    const Side from_side = from.tracked ? Side::Pinned : Side::Pageable;
    return copy(st, queue, to, from, n, has_stream ? async_copy(to_side, from_side) : no_stream_copy(to_side, from_side));
}

CUresult memcpy_dtoh(void* dst, CUdeviceptr src, std::size_t n, CUstream stream, bool has_stream, bool per_thread) {
    State& st = fake::state();
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = queue_of(st, stream, per_thread, &queue)) return rc;
    if (n == 0) return CUDA_SUCCESS;
    const Operand from = device_operand(st, src);
    if (!dst || check_present(st, from, n) != CUDA_SUCCESS || unreachable_pool_block(st, stream, from.address) ||
        host_pool_block(st, from.address))
        return CUDA_ERROR_INVALID_VALUE;
    const Operand to = host_operand(st, dst, n);
    const Side to_side = to.tracked ? Side::Pinned : Side::Pageable;
    const Side from_side = side_of(st, from.address);
    return copy(st, queue, to, from, n, has_stream ? async_copy(to_side, from_side) : no_stream_copy(to_side, from_side));
}

CUresult memcpy_dtod(CUdeviceptr dst, CUdeviceptr src, std::size_t n, CUstream stream, bool has_stream,
                     bool per_thread) {
    State& st = fake::state();
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = queue_of(st, stream, per_thread, &queue)) return rc;
    if (n == 0) return CUDA_SUCCESS;
    const Operand to = device_operand(st, dst);
    const Operand from = device_operand(st, src);
    if (check_present(st, to, n) != CUDA_SUCCESS || check_present(st, from, n) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    const Side to_side = side_of(st, to.address);
    const Side from_side = side_of(st, from.address);
    return copy(st, queue, to, from, n, has_stream ? async_copy(to_side, from_side) : no_stream_copy(to_side, from_side));
}

// `count` elements of `width` (1, 2 or 4) bytes, each set to `value`.
CUresult memset_words(CUdeviceptr dst, unsigned int value, std::size_t count, std::size_t width, CUstream stream,
                      bool has_stream, bool per_thread) {
    State& st = fake::state();
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = queue_of(st, stream, per_thread, &queue)) return rc;
    if (dst % width != 0) return CUDA_ERROR_INVALID_VALUE;
    if (count == 0) return CUDA_SUCCESS;
    if (count > (~std::size_t{0}) / width) return CUDA_ERROR_INVALID_VALUE;
    const std::size_t n = count * width;
    const Operand to = device_operand(st, dst);
    if (check_present(st, to, n) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    const Returns returns = has_stream ? Returns::AtOnce : no_stream_set(side_of(st, to.address));
    return submit(
        st, queue,
        [to, value, count, width](State& s) {
            auto* bytes = static_cast<unsigned char*>(locate(s, to, count * width));
            if (!bytes) return CUDA_ERROR_ILLEGAL_ADDRESS;
            if (width == 1) {
                std::memset(bytes, static_cast<int>(value & 0xFFu), count);
            } else {
                for (std::size_t i = 0; i < count; ++i) std::memcpy(bytes + width * i, &value, width);
            }
            return CUDA_SUCCESS;
        },
        returns);
}

#if FAKE_HAS(12080)
// cuMemcpyBatchAsync, both ABIs (12.8 with `failIdx`, 13.0 without: null),
// as driver 580 answered on an H200
// (docs/measurements/h200-2026-11-25-batch-dmabuf-hostvmm-pointers.md):
//
//   * refused with CUDA_ERROR_INVALID_VALUE at the call, nothing queued: the
//     legacy default stream (0 on the legacy entry, CU_STREAM_LEGACY on any;
//     failIdx unwritten), count 0, numAttrs 0, attrIdxs[0] != 0, an order of
//     0 (INVALID) or above 3 (ANY); cuda.h's further rules (attrIdxs rising,
//     the last below count, numAttrs <= count) and flag bits other than
//     PREFER_OVERLAP_WITH_COMPUTE too (documented, not measured), and a
//     location hint other than none, the host, a NUMA node or an existing
//     device (cuda.h's description; not measured);
//   * a copy of size 0, or one whose range runs past its allocation:
//     INVALID_VALUE, failIdx = that copy's index, nothing queued; but the
//     copies listed before it between two pageable host ranges have been
//     done at the call (on the H200 such copies of a refused batch had
//     written their destinations, wholly or in part, when the call returned;
//     the fake does them wholly);
//   * success: failIdx = SIZE_MAX, the copies run later, in stream order, as
//     one piece of stream work (FAKECUDA_STREAM_DELAY_US applies).
//
// Within a batch the driver gives no order: the fake runs the copies last to
// first, so a caller relying on the order it listed them in is caught. The
// destination is written in stream order whatever the source order says.
// Untracked addresses are pageable host memory, as with cuMemcpyAsync (the
// real driver took an unmapped 0x1000 for host memory and crashed). When the
// call returns and when each source is read follow what driver 580 did with
// a batch queued behind a long kernel:
//   * a pageable source in STREAM order: the call returns once the copy is
//     done (it waited for the work before it);
//   * a pageable source with DURING_API_CALL or ANY: the call returns at
//     once with the source's first kStagedAtCall bytes taken; the rest is
//     read when the work runs, after the call returned (the driver read the
//     tail of a 64 MiB source after its return, DURING_API_CALL or not);
//   * a pinned or device source: read when the work runs (STREAM, ANY; the
//     call returns at once), or at the call with DURING_API_CALL; a pinned
//     one then returns once the copy is done (measured), a device one at
//     once (not measured: the documented minimum);
//   * a pageable destination: the call returns at once, the destination
//     written when the work runs (the driver returned with a 4 KiB
//     destination not yet written, and a 64 MiB one written only in part).
// A batch returns once its work is done when any copy asks for it.
// How much of a pageable DURING_API_CALL or ANY source a batch takes at the
// call: 4 KiB was taken whole, 64 MiB only in part; where between the driver
// stops was not measured.
constexpr std::size_t kStagedAtCall = std::size_t{64} << 10;

CUresult memcpy_batch(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count, CUmemcpyAttributes* attrs,
                      size_t* attrIdxs, size_t numAttrs, size_t* failIdx, CUstream stream, bool per_thread) {
    State& st = fake::state();
    if (!dsts || !srcs || !sizes || !attrs || !attrIdxs) return CUDA_ERROR_INVALID_VALUE;
    if (count == 0 || numAttrs == 0 || numAttrs > count) return CUDA_ERROR_INVALID_VALUE;
    if (stream == CU_STREAM_LEGACY || (stream == nullptr && !per_thread)) return CUDA_ERROR_INVALID_VALUE;
    if (attrIdxs[0] != 0 || attrIdxs[numAttrs - 1] >= count) return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < numAttrs; ++k) {
        if (k > 0 && attrIdxs[k] <= attrIdxs[k - 1]) return CUDA_ERROR_INVALID_VALUE;
        const int order = fake::raw(attrs[k].srcAccessOrder);
        if (order < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM || order > CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
            return CUDA_ERROR_INVALID_VALUE;
        if ((attrs[k].flags & ~static_cast<unsigned>(CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE)) != 0)
            return CUDA_ERROR_INVALID_VALUE;
        if (!hint_valid(st, attrs[k].srcLocHint) || !hint_valid(st, attrs[k].dstLocHint))
            return CUDA_ERROR_INVALID_VALUE;
    }
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = queue_of(st, stream, per_thread, &queue)) return rc;

    struct Planned {
        Operand to, from;
        std::size_t n;
        std::size_t at_call;  // the source's first bytes read at the call (n: all of it)
        std::shared_ptr<std::vector<unsigned char>> prefix;
    };
    std::vector<Planned> copies;
    const auto refuse = [&](size_t i) {
        for (const Planned& copy : copies) {
            if (side_of(st, copy.to.address) != Side::Pageable || side_of(st, copy.from.address) != Side::Pageable)
                continue;
            std::memmove(locate(st, copy.to, copy.n), locate(st, copy.from, copy.n), copy.n);
        }
        if (failIdx) *failIdx = i;
        return CUDA_ERROR_INVALID_VALUE;
    };
    copies.reserve(count);
    size_t k = 0;
    bool returns_when_done = false;
    for (size_t i = 0; i < count; ++i) {
        while (k + 1 < numAttrs && attrIdxs[k + 1] <= i) ++k;
        const std::size_t n = sizes[i];
        if (n == 0) return refuse(i);
        Operand to = unified(st, dsts[i]);
        Operand from = unified(st, srcs[i]);
        if (check_present(st, to, n) != CUDA_SUCCESS || check_present(st, from, n) != CUDA_SUCCESS) return refuse(i);
        const int order = fake::raw(attrs[k].srcAccessOrder);
        const Side source_side = side_of(st, from.address);
        std::size_t at_call = 0;
        if (source_side == Side::Pageable) {
            if (order == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM) returns_when_done = true;
            else at_call = std::min(n, kStagedAtCall);
        } else if (order == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL) {
            at_call = n;
            returns_when_done = returns_when_done || source_side == Side::Pinned;
        }
        copies.push_back({to, from, n, at_call, nullptr});
    }
    // Every copy was accepted: now (and only now) read what is read at the call.
    for (Planned& copy : copies) {
        if (copy.at_call == 0) continue;
        const auto* bytes = static_cast<const unsigned char*>(locate(st, copy.from, copy.at_call));
        copy.prefix = std::make_shared<std::vector<unsigned char>>(bytes, bytes + copy.at_call);
    }
    if (failIdx) *failIdx = SIZE_MAX;
    return submit(
        st, queue,
        [copies = std::move(copies)](State& s) {
            for (auto copy = copies.rbegin(); copy != copies.rend(); ++copy) {
                auto* to = static_cast<unsigned char*>(locate(s, copy->to, copy->n));
                if (!to) return CUDA_ERROR_ILLEGAL_ADDRESS;
                if (copy->prefix) std::memmove(to, copy->prefix->data(), copy->at_call);
                if (copy->at_call == copy->n) continue;
                const auto* from = static_cast<const unsigned char*>(locate(s, copy->from, copy->n));
                if (!from) return CUDA_ERROR_ILLEGAL_ADDRESS;
                std::memmove(to + copy->at_call, from + copy->at_call, copy->n - copy->at_call);
            }
            return CUDA_SUCCESS;
        },
        returns_when_done ? Returns::WhenDone : Returns::AtOnce);
}
#endif

}  // namespace

// ---- copies ----------------------------------------------------------------------------------

FAKE_API CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_unified(dst, src, ByteCount, nullptr, kNoStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_unified(dst, src, ByteCount, nullptr, kNoStream, kPerThread);
}

FAKE_API CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_unified(dst, src, ByteCount, hStream, kStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_unified(dst, src, ByteCount, hStream, kStream, kPerThread);
}

FAKE_API CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_htod(dstDevice, srcHost, ByteCount, nullptr, kNoStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_htod(dstDevice, srcHost, ByteCount, nullptr, kNoStream, kPerThread);
}

FAKE_API CUresult CUDAAPI cuMemcpyDtoH_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_dtoh(dstHost, srcDevice, ByteCount, nullptr, kNoStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_dtoh(dstHost, srcDevice, ByteCount, nullptr, kNoStream, kPerThread);
}

FAKE_API CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_dtod(dstDevice, srcDevice, ByteCount, nullptr, kNoStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_dtod(dstDevice, srcDevice, ByteCount, nullptr, kNoStream, kPerThread);
}

FAKE_API CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount,
                                               CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_htod(dstDevice, srcHost, ByteCount, hStream, kStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount,
                                                    CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_htod(dstDevice, srcHost, ByteCount, hStream, kStream, kPerThread);
}

FAKE_API CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                               CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_dtoh(dstHost, srcDevice, ByteCount, hStream, kStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                                    CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_dtoh(dstHost, srcDevice, ByteCount, hStream, kStream, kPerThread);
}

FAKE_API CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                               CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_dtod(dstDevice, srcDevice, ByteCount, hStream, kStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                                    size_t ByteCount, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_dtod(dstDevice, srcDevice, ByteCount, hStream, kStream, kPerThread);
}

// ---- peer copies -----------------------------------------------------------------------------
// A copy between two contexts' memory: both contexts must be live; the copy
// itself is a device-to-device copy (peer access is not needed for it).

namespace {
CUresult memcpy_peer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, std::size_t n,
                     CUstream stream, bool has_stream, bool per_thread) {
    State& st = fake::state();
    if (!fake::known_context(st, dst_ctx) || !fake::known_context(st, src_ctx) || dst_ctx->refcount <= 0 ||
        src_ctx->refcount <= 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    return memcpy_dtod(dst, src, n, stream, has_stream, per_thread);
}
}  // namespace

FAKE_API CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                       CUcontext srcContext, size_t ByteCount) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, nullptr, kNoStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                            CUcontext srcContext, size_t ByteCount) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, nullptr, kNoStream, kPerThread);
}

FAKE_API CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                            CUcontext srcContext, size_t ByteCount, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, kStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                                 CUcontext srcContext, size_t ByteCount, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, kStream, kPerThread);
}

// ---- sets ------------------------------------------------------------------------------------

FAKE_API CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
    FAKE_ENTER(fake::kNeedsInit);
    return memset_words(dstDevice, uc, N, 1, nullptr, kNoStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
    FAKE_ENTER(fake::kNeedsInit);
    return memset_words(dstDevice, uc, N, 1, nullptr, kNoStream, kPerThread);
}

FAKE_API CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memset_words(dstDevice, uc, N, 1, hStream, kStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                               CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memset_words(dstDevice, uc, N, 1, hStream, kStream, kPerThread);
}

FAKE_API CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N) {
    FAKE_ENTER(fake::kNeedsInit);
    return memset_words(dstDevice, us, N, 2, nullptr, kNoStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N) {
    FAKE_ENTER(fake::kNeedsInit);
    return memset_words(dstDevice, us, N, 2, nullptr, kNoStream, kPerThread);
}

FAKE_API CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memset_words(dstDevice, us, N, 2, hStream, kStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                                CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memset_words(dstDevice, us, N, 2, hStream, kStream, kPerThread);
}

FAKE_API CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
    FAKE_ENTER(fake::kNeedsInit);
    return memset_words(dstDevice, ui, N, 4, nullptr, kNoStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
    FAKE_ENTER(fake::kNeedsInit);
    return memset_words(dstDevice, ui, N, 4, nullptr, kNoStream, kPerThread);
}

FAKE_API CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memset_words(dstDevice, ui, N, 4, hStream, kStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                                CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memset_words(dstDevice, ui, N, 4, hStream, kStream, kPerThread);
}

// ---- batches ---------------------------------------------------------------------------------
// The 12.8 ABI keeps the unsuffixed name and reports the failing copy; the
// 13.0 ABI (cuMemcpyBatchAsync_v2, what cuda.h 13's cuMemcpyBatchAsync
// means) drops failIdx. Driver 580 exports both, and cuGetProcAddress gives
// one per version (fakecuda_registry.cpp).

#if FAKE_HAS(12080)
FAKE_API CUresult CUDAAPI cuMemcpyBatchAsync(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                             CUmemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs,
                                             size_t* failIdx, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpyBatchAsync_ptsz(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                                  CUmemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs,
                                                  size_t* failIdx, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream, kPerThread);
}
#endif

#if FAKE_HAS(13000)
FAKE_API CUresult CUDAAPI cuMemcpyBatchAsync_v2(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                                CUmemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs,
                                                CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, nullptr, hStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes,
                                                     size_t count, CUmemcpyAttributes* attrs, size_t* attrsIdxs,
                                                     size_t numAttrs, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return memcpy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, nullptr, hStream, kPerThread);
}
#endif
