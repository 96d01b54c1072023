// fakecuda_copy3d.cpp — pitched allocation, 2D and 3D copies, 2D sets and 3D
// copy batches: the same model as fakecuda_transfers.cpp (checked at the call,
// run later as stream work that finds its memory again, returning when the
// driver's synchronization rules say), walked row by row.
//
// Modelled from cuda.h's rules, not measured: a pitch below the row (offset +
// width) is INVALID_VALUE; a 3D side's rows per layer below its offset +
// height too; a copy of zero width, height or depth does nothing (the batch
// refuses it, as cuda.h says). CUDA arrays are not modelled (NOT_SUPPORTED).
#include "fake_state.hpp"
#include "fake_enum.hpp"
#include "fake_transfer.hpp"

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#if FAKE_HAS(12080)
// A location hint of a copy: none (INVALID, what a zeroed attribute or
// operand holds), the host, a host NUMA node, or a device that exists
// (modelled on cuda.h's description; the real answers were not measured).
bool fake::transfer::hint_valid(const State& st, const CUmemLocation& hint) {
    switch (fake::raw(hint.type)) {
        case CU_MEM_LOCATION_TYPE_INVALID:
        case CU_MEM_LOCATION_TYPE_HOST:
        case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: return true;
        case CU_MEM_LOCATION_TYPE_HOST_NUMA: return hint.id >= 0;
        case CU_MEM_LOCATION_TYPE_DEVICE: return fake::valid_device(st, hint.id);
        default: return false;
    }
}
#endif

namespace {

using fake::State;
using namespace fake::transfer;

// The pitch cuMemAllocPitch gives: rows rounded up to this many bytes (the
// texture pitch alignment of recent GPUs; the real value is the device's).
constexpr std::size_t kPitchAlignment = 512;

// How one side of a strided transfer is laid out: bytes between row starts,
// rows between layer starts.
struct Layout {
    std::size_t pitch;
    std::size_t rows_per_layer;
};
struct Box {
    std::size_t width;  // bytes
    std::size_t height;
    std::size_t depth;
};

constexpr std::size_t kMax = ~std::size_t{0};

// The bytes a box spans in a layout, from its first byte to past its last; 0
// when that overflows.
std::size_t span_bytes(Layout layout, Box box) {
    if (layout.rows_per_layer != 0 && layout.pitch > kMax / layout.rows_per_layer) return 0;
    const std::size_t layer = layout.pitch * layout.rows_per_layer;
    if (box.depth - 1 != 0 && layer > kMax / (box.depth - 1)) return 0;
    if (box.height - 1 != 0 && layout.pitch > kMax / (box.height - 1)) return 0;
    const std::size_t a = layer * (box.depth - 1);
    const std::size_t b = layout.pitch * (box.height - 1);
    if (a > kMax - b || a + b > kMax - box.width) return 0;
    return a + b + box.width;
}

// The strided walk every entry here shares: each row of the box, with its
// offset on either side.
template <typename Row>
void for_each_row(Layout to, Layout from, Box box, Row row) {
    for (std::size_t z = 0; z < box.depth; ++z)
        for (std::size_t y = 0; y < box.height; ++y)
            row((z * to.rows_per_layer + y) * to.pitch, (z * from.rows_per_layer + y) * from.pitch);
}

// The offset of (x, y, z) in a layout; kMax when it overflows.
std::size_t offset_of(Layout layout, std::size_t x, std::size_t y, std::size_t z) {
    const std::size_t at = span_bytes(layout, Box{x + 1, y + 1, z + 1});
    return at == 0 || x == kMax || y == kMax || z == kMax ? kMax : at - 1;
}

// One side as a call describes it.
struct Described {
    CUmemorytype type;
    const void* host;
    CUdeviceptr device;
    std::size_t x, y, z;
    Layout layout;
};

CUresult operand_of(State& st, const Described& side, std::size_t span, Operand* out, std::size_t* start) {
    const std::size_t offset = offset_of(side.layout, side.x, side.y, side.z);
    if (offset == kMax) return CUDA_ERROR_INVALID_VALUE;
    *start = offset;
    switch (fake::raw(side.type)) {
        case CU_MEMORYTYPE_HOST: {
            if (!side.host) return CUDA_ERROR_INVALID_VALUE;
            const auto* at = static_cast<const unsigned char*>(side.host) + offset;
            *out = host_operand(st, at, span);
            return CUDA_SUCCESS;
        }
        case CU_MEMORYTYPE_DEVICE: *out = device_operand(st, side.device + offset); break;
        case CU_MEMORYTYPE_UNIFIED: *out = unified(st, side.device + offset); break;
        case CU_MEMORYTYPE_ARRAY: return CUDA_ERROR_NOT_SUPPORTED;  // arrays are not modelled
        default: return CUDA_ERROR_INVALID_VALUE;
    }
    return check_present(st, *out, span);
}

// A strided copy: both sides checked now and found again when it runs.
CUresult strided_copy(State& st, CUstream stream, bool has_stream, bool per_thread, const Described& to_side,
                      const Described& from_side, Box box) {
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = queue_of(st, stream, per_thread, &queue)) return rc;
    if (box.width == 0 || box.height == 0 || box.depth == 0) return CUDA_SUCCESS;
    if (to_side.layout.pitch < to_side.x + box.width || from_side.layout.pitch < from_side.x + box.width)
        return CUDA_ERROR_INVALID_VALUE;
    const std::size_t to_span = span_bytes(to_side.layout, box);
    const std::size_t from_span = span_bytes(from_side.layout, box);
    if (to_span == 0 || from_span == 0) return CUDA_ERROR_INVALID_VALUE;
    Operand to, from;
    std::size_t ignored = 0;
    if (CUresult rc = operand_of(st, to_side, to_span, &to, &ignored)) return rc;
    if (CUresult rc = operand_of(st, from_side, from_span, &from, &ignored)) return rc;
    const Side to_kind = to.how == Operand::How::Host ? (to.tracked ? Side::Pinned : Side::Pageable)
                                                      : side_of(st, to.address);
    const Side from_kind = from.how == Operand::How::Host ? (from.tracked ? Side::Pinned : Side::Pageable)
                                                          : side_of(st, from.address);
    const Returns returns = has_stream ? async_copy(to_kind, from_kind) : no_stream_copy(to_kind, from_kind);
    if (returns == Returns::Staged) {
        const auto* bytes = static_cast<const unsigned char*>(locate(st, from, from_span));
        from.staged = std::make_shared<std::vector<unsigned char>>(bytes, bytes + from_span);
        from.how = Operand::How::Staged;
    }
    const Layout to_layout = to_side.layout;
    const Layout from_layout = from_side.layout;
    return submit(
        st, queue,
        [=](State& s) {
            auto* target = static_cast<unsigned char*>(locate(s, to, to_span));
            const auto* source = static_cast<const unsigned char*>(locate(s, from, from_span));
            if (!target || !source) return CUDA_ERROR_ILLEGAL_ADDRESS;
            for_each_row(to_layout, from_layout, box, [&](std::size_t to_row, std::size_t from_row) {
                std::memmove(target + to_row, source + from_row, box.width);
            });
            return CUDA_SUCCESS;
        },
        returns);
}

CUresult copy_2d(const CUDA_MEMCPY2D_v2* p, CUstream stream, bool has_stream, bool per_thread) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    const Described to{p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, 0, {p->dstPitch, 0}};
    const Described from{p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, 0, {p->srcPitch, 0}};
    return strided_copy(fake::state(), stream, has_stream, per_thread, to, from, Box{p->WidthInBytes, p->Height, 1});
}

CUresult copy_3d(const CUDA_MEMCPY3D_v2* p, CUstream stream, bool has_stream, bool per_thread) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    // Rows per layer only matter across layers; each must hold its rows.
    if (p->Depth > 1 && (p->dstHeight < p->dstY + p->Height || p->srcHeight < p->srcY + p->Height))
        return CUDA_ERROR_INVALID_VALUE;
    const Described to{p->dstMemoryType, p->dstHost,   p->dstDevice, p->dstXInBytes,
                       p->dstY,          p->dstZ,      {p->dstPitch, p->dstHeight}};
    const Described from{p->srcMemoryType, p->srcHost,   p->srcDevice, p->srcXInBytes,
                         p->srcY,          p->srcZ,      {p->srcPitch, p->srcHeight}};
    return strided_copy(fake::state(), stream, has_stream, per_thread, to, from,
                        Box{p->WidthInBytes, p->Height, p->Depth});
}

// cuMemsetD2D{8,16,32}: `width` elements of `size` bytes in each of `height`
// rows `pitch` apart.
CUresult set_2d(CUdeviceptr dst, std::size_t pitch, unsigned int value, std::size_t width, std::size_t height,
                std::size_t size, CUstream stream, bool has_stream, bool per_thread) {
    State& st = fake::state();
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = queue_of(st, stream, per_thread, &queue)) return rc;
    if (dst % size != 0 || pitch % size != 0) return CUDA_ERROR_INVALID_VALUE;
    if (width == 0 || height == 0) return CUDA_SUCCESS;
    if (width > kMax / size || pitch < width * size) return CUDA_ERROR_INVALID_VALUE;
    const Box box{width * size, height, 1};
    const Layout layout{pitch, 0};
    const std::size_t span = span_bytes(layout, box);
    const Operand to = device_operand(st, dst);
    if (span == 0 || check_present(st, to, span) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    const Returns returns = has_stream ? Returns::AtOnce : no_stream_set(side_of(st, to.address));
    return submit(
        st, queue,
        [=](State& s) {
            auto* bytes = static_cast<unsigned char*>(locate(s, to, span));
            if (!bytes) return CUDA_ERROR_ILLEGAL_ADDRESS;
            for_each_row(layout, layout, box, [&](std::size_t row, std::size_t) {
                for (std::size_t i = 0; i < width; ++i) std::memcpy(bytes + row + i * size, &value, size);
            });
            return CUDA_SUCCESS;
        },
        returns);
}

#if FAKE_HAS(12080)
// cuMemcpy3DBatchAsync, both ABIs (12.8 with failIdx, 13.0 without: null).
// Refused at the call with nothing queued: the legacy default stream, no
// operations, flags other than 0 (failIdx unwritten); an operation of zero
// extent, a row length or layer height below the extent, an unknown order or
// flag, a bad location hint, a side past its allocation (failIdx names it).
// The copies run later as one piece of stream work, last to first (no order
// within a batch); a DURING_API_CALL source is read at the call, others when
// the work runs; a pageable source in stream order makes the call return once
// the work is done, as the 1D batch does.
CUresult copy_3d_batch(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* ops, size_t* failIdx, unsigned long long flags,
                       CUstream stream, bool per_thread) {
    State& st = fake::state();
    if (!ops || numOps == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (stream == CU_STREAM_LEGACY || (stream == nullptr && !per_thread)) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<fake::Queue> queue;
    if (CUresult rc = queue_of(st, stream, per_thread, &queue)) return rc;
    struct Planned {
        Operand to, from;
        Layout to_layout, from_layout;
        std::size_t to_span, from_span;
        Box box;
    };
    std::vector<Planned> copies;
    copies.reserve(numOps);
    bool returns_when_done = false;
    const auto refuse = [&](size_t i) {
        if (failIdx) *failIdx = i;
        return CUDA_ERROR_INVALID_VALUE;
    };
    for (size_t i = 0; i < numOps; ++i) {
        const CUDA_MEMCPY3D_BATCH_OP& op = ops[i];
        if (fake::raw(op.src.type) == CU_MEMCPY_OPERAND_TYPE_ARRAY ||
            fake::raw(op.dst.type) == CU_MEMCPY_OPERAND_TYPE_ARRAY)
            return CUDA_ERROR_NOT_SUPPORTED;  // arrays are not modelled
        if (fake::raw(op.src.type) != CU_MEMCPY_OPERAND_TYPE_POINTER ||
            fake::raw(op.dst.type) != CU_MEMCPY_OPERAND_TYPE_POINTER)
            return refuse(i);
        const Box box{op.extent.width, op.extent.height, op.extent.depth};
        if (box.width == 0 || box.height == 0 || box.depth == 0) return refuse(i);
        const int order = fake::raw(op.srcAccessOrder);
        if (order < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM || order > CU_MEMCPY_SRC_ACCESS_ORDER_ANY) return refuse(i);
        if ((op.flags & ~static_cast<unsigned>(CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE)) != 0) return refuse(i);
        if (!hint_valid(st, op.src.op.ptr.locHint) || !hint_valid(st, op.dst.op.ptr.locHint)) return refuse(i);
        const auto layout_of = [&box](const CUmemcpy3DOperand& side) {
            return Layout{side.op.ptr.rowLength == 0 ? box.width : side.op.ptr.rowLength,
                          side.op.ptr.layerHeight == 0 ? box.height : side.op.ptr.layerHeight};
        };
        Planned copy{unified(st, op.dst.op.ptr.ptr), unified(st, op.src.op.ptr.ptr), layout_of(op.dst),
                     layout_of(op.src), 0, 0, box};
        if (copy.to_layout.pitch < box.width || copy.from_layout.pitch < box.width ||
            copy.to_layout.rows_per_layer < box.height || copy.from_layout.rows_per_layer < box.height)
            return refuse(i);
        copy.to_span = span_bytes(copy.to_layout, box);
        copy.from_span = span_bytes(copy.from_layout, box);
        if (copy.to_span == 0 || copy.from_span == 0 || check_present(st, copy.to, copy.to_span) != CUDA_SUCCESS ||
            check_present(st, copy.from, copy.from_span) != CUDA_SUCCESS)
            return refuse(i);
        const bool pageable_source = side_of(st, copy.from.address) == Side::Pageable;
        if (order == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL) copy.from.how = Operand::How::Staged;
        else if (pageable_source && order == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM) returns_when_done = true;
        copies.push_back(copy);
    }
    // Every copy was accepted: now (and only now) read what is read at the call.
    for (Planned& copy : copies) {
        if (copy.from.how != Operand::How::Staged) continue;
        copy.from.how = Operand::How::Unified;
        const auto* bytes = static_cast<const unsigned char*>(locate(st, copy.from, copy.from_span));
        copy.from.staged = std::make_shared<std::vector<unsigned char>>(bytes, bytes + copy.from_span);
        copy.from.how = Operand::How::Staged;
    }
    if (failIdx) *failIdx = SIZE_MAX;
    return submit(
        st, queue,
        [copies = std::move(copies)](State& s) {
            for (auto copy = copies.rbegin(); copy != copies.rend(); ++copy) {
                auto* target = static_cast<unsigned char*>(locate(s, copy->to, copy->to_span));
                const auto* source = static_cast<const unsigned char*>(locate(s, copy->from, copy->from_span));
                if (!target || !source) return CUDA_ERROR_ILLEGAL_ADDRESS;
                const std::size_t width = copy->box.width;
                for_each_row(copy->to_layout, copy->from_layout, copy->box,
                             [&](std::size_t to_row, std::size_t from_row) {
                                 std::memmove(target + to_row, source + from_row, width);
                             });
            }
            return CUDA_SUCCESS;
        },
        returns_when_done ? Returns::WhenDone : Returns::AtOnce);
}
#endif

}  // namespace

// ---- pitched allocation ----------------------------------------------------------------------

// Plain device memory of pitch * height bytes (cuMemAlloc's model), the pitch
// the row rounded up to kPitchAlignment. The element size must be 4, 8 or 16.
FAKE_API CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                                             unsigned int ElementSizeBytes) {
    FAKE_ENTER(fake::kNeedsInit);
    if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0) return CUDA_ERROR_INVALID_VALUE;
    if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) return CUDA_ERROR_INVALID_VALUE;
    if (WidthInBytes > kMax - kPitchAlignment) return CUDA_ERROR_INVALID_VALUE;
    const std::size_t pitch = (WidthInBytes + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
    if (Height > kMax / pitch) return CUDA_ERROR_OUT_OF_MEMORY;
    const CUresult rc = fake::allocate_device_memory(fake::state(), dptr, pitch * Height);
    if (rc == CUDA_SUCCESS) *pPitch = pitch;
    return rc;
}

// ---- 2D and 3D copies --------------------------------------------------------------------------

FAKE_API CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D_v2* pCopy) {
    FAKE_ENTER(fake::kNeedsInit);
    return copy_2d(pCopy, nullptr, kNoStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D_v2* pCopy) {
    FAKE_ENTER(fake::kNeedsInit);
    return copy_2d(pCopy, nullptr, kNoStream, kPerThread);
}

FAKE_API CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D_v2* pCopy, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return copy_2d(pCopy, hStream, kStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D_v2* pCopy, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return copy_2d(pCopy, hStream, kStream, kPerThread);
}

FAKE_API CUresult CUDAAPI cuMemcpy3D_v2(const CUDA_MEMCPY3D_v2* pCopy) {
    FAKE_ENTER(fake::kNeedsInit);
    return copy_3d(pCopy, nullptr, kNoStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D_v2* pCopy) {
    FAKE_ENTER(fake::kNeedsInit);
    return copy_3d(pCopy, nullptr, kNoStream, kPerThread);
}

FAKE_API CUresult CUDAAPI cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D_v2* pCopy, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return copy_3d(pCopy, hStream, kStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D_v2* pCopy, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return copy_3d(pCopy, hStream, kStream, kPerThread);
}

// ---- 2D sets ---------------------------------------------------------------------------------

#define FAKECUDA_SET_2D(name, type, size)                                                                      \
    FAKE_API CUresult CUDAAPI name##_v2(CUdeviceptr dst, size_t pitch, type value, size_t width, size_t height) { \
        FAKE_ENTER(fake::kNeedsInit);                                                                          \
        return set_2d(dst, pitch, value, width, height, size, nullptr, kNoStream, kLegacy);                    \
    }                                                                                                          \
    FAKE_API CUresult CUDAAPI name##_v2_ptds(CUdeviceptr dst, size_t pitch, type value, size_t width,          \
                                             size_t height) {                                                  \
        FAKE_ENTER(fake::kNeedsInit);                                                                          \
        return set_2d(dst, pitch, value, width, height, size, nullptr, kNoStream, kPerThread);                 \
    }                                                                                                          \
    FAKE_API CUresult CUDAAPI name##Async(CUdeviceptr dst, size_t pitch, type value, size_t width, size_t height, \
                                          CUstream hStream) {                                                  \
        FAKE_ENTER(fake::kNeedsInit);                                                                          \
        return set_2d(dst, pitch, value, width, height, size, hStream, kStream, kLegacy);                      \
    }                                                                                                          \
    FAKE_API CUresult CUDAAPI name##Async_ptsz(CUdeviceptr dst, size_t pitch, type value, size_t width,        \
                                               size_t height, CUstream hStream) {                              \
        FAKE_ENTER(fake::kNeedsInit);                                                                          \
        return set_2d(dst, pitch, value, width, height, size, hStream, kStream, kPerThread);                   \
    }

FAKECUDA_SET_2D(cuMemsetD2D8, unsigned char, 1)
FAKECUDA_SET_2D(cuMemsetD2D16, unsigned short, 2)
FAKECUDA_SET_2D(cuMemsetD2D32, unsigned int, 4)
#undef FAKECUDA_SET_2D

// ---- 3D batches ------------------------------------------------------------------------------
// As cuMemcpyBatchAsync: the 12.8 ABI keeps the unsuffixed name and reports
// the failing operation; the 13.0 ABI (_v2) drops failIdx.

#if FAKE_HAS(12080)
FAKE_API CUresult CUDAAPI cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* opList, size_t* failIdx,
                                               unsigned long long flags, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return copy_3d_batch(numOps, opList, failIdx, flags, hStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* opList, size_t* failIdx,
                                                    unsigned long long flags, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return copy_3d_batch(numOps, opList, failIdx, flags, hStream, kPerThread);
}
#endif

#if FAKE_HAS(13000)
FAKE_API CUresult CUDAAPI cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* opList,
                                                  unsigned long long flags, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return copy_3d_batch(numOps, opList, nullptr, flags, hStream, kLegacy);
}

FAKE_API CUresult CUDAAPI cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* opList,
                                                       unsigned long long flags, CUstream hStream) {
    FAKE_ENTER(fake::kNeedsInit);
    return copy_3d_batch(numOps, opList, nullptr, flags, hStream, kPerThread);
}
#endif
