// cudyn — PitchedBuffer: cuMemAllocPitch_v2 / cuMemFree_v2.
#include "cudyn/memory/pitched_buffer.hpp"
#include "cudyn/detail/size_checks.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "core/internal.hpp"
#include "memory/internal.hpp"

#include <string>
#include <utility>

namespace cudyn {

PitchedBuffer::PitchedBuffer(detail::OwnedMemory memory, std::size_t width_bytes, std::size_t pitch,
                             std::size_t height, std::size_t depth) noexcept
    : memory_(std::move(memory)), width_bytes_(width_bytes), pitch_(pitch), height_(height), depth_(depth) {}

Result<PitchedBuffer> PitchedBuffer::allocate(std::size_t width_bytes, std::size_t height, std::size_t depth,
                                              unsigned access_size) {
    constexpr detail::Operation kAllocate{"PitchedBuffer::allocate"};
    if (width_bytes == 0) return kAllocate.invalid("the width is 0 bytes");
    if (height == 0) return kAllocate.invalid("the height is 0 rows");
    if (depth == 0) return kAllocate.invalid("the depth is 0 layers");
    if (access_size != 4 && access_size != 8 && access_size != 16)
        return kAllocate.invalid("the access size is " + std::to_string(access_size) +
                                 " bytes; cuMemAllocPitch takes 4, 8 or 16");
    CUDYN_TRY_ASSIGN(const std::size_t rows, detail::byte_size(height, depth, "PitchedBuffer::allocate: height x depth"));
    // The pitch is at least the width: refuse what could not be addressed at all.
    CUDYN_TRY(detail::byte_size(rows, width_bytes, "PitchedBuffer::allocate: rows x width"));
    CUDYN_TRY_ASSIGN(auto context, detail::OwnerContext::current());
    CUdeviceptr pointer = 0;
    std::size_t pitch = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemAllocPitch_v3020, &pointer, &pitch, width_bytes, rows, access_size));
    return PitchedBuffer(detail::OwnedMemory(static_cast<std::uintptr_t>(pointer), pointer, pitch * rows,
                                             detail::free_device_memory, std::move(context), MemoryKind::Device),
                         width_bytes, pitch, height, depth);
}

PitchedSpan PitchedBuffer::span() const noexcept {
    if (empty()) return PitchedSpan();
    // The buffer's own shape was checked when it was allocated.
    auto span = PitchedSpan::device(device_address(), width_bytes_, pitch_, height_, depth_);
    return span ? *span : PitchedSpan();
}

Result<void> PitchedBuffer::free() {
    CUDYN_TRY(memory_.release());
    width_bytes_ = pitch_ = height_ = depth_ = 0;
    return ok();
}

}  // namespace cudyn
