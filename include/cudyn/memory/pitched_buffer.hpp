// cudyn — PitchedBuffer: device memory from cuMemAllocPitch, rows padded by
// the driver to a pitch that suits the device's memory accesses, owned and
// move-only like DeviceBuffer. `depth` layers of `height` rows make a 3D
// volume (one allocation of height * depth rows).
//
// Needs a current context; the buffer keeps that context and is freed in it
// (cuMemFree). A zero width, height or depth, rows that overflow, or an
// access size other than 4, 8 or 16 bytes is InvalidArgument before the
// driver is called.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/memory/owned_memory.hpp"
#include "cudyn/memory/pitched_span.hpp"

#include <cuda.h>

#include <cstddef>

namespace cudyn {

class PitchedBuffer {
public:
    // `access_size`: the widest element kernels read or write (4, 8 or 16
    // bytes), which the driver's choice of pitch may depend on.
    static Result<PitchedBuffer> allocate(std::size_t width_bytes, std::size_t height, std::size_t depth = 1,
                                          unsigned access_size = 16);

    PitchedBuffer() noexcept = default;  // empty

    CUdeviceptr device_address() const noexcept { return memory_.empty() ? 0 : memory_.device_address(); }
    std::size_t width_bytes() const noexcept { return width_bytes_; }
    std::size_t pitch() const noexcept { return pitch_; }
    std::size_t height() const noexcept { return height_; }
    std::size_t depth() const noexcept { return depth_; }
    std::size_t size_bytes() const noexcept { return memory_.empty() ? 0 : memory_.bytes(); }
    bool empty() const noexcept { return memory_.empty(); }
    // The whole buffer as a span (empty when the buffer is).
    PitchedSpan span() const noexcept;

    // Gives the memory back now; unchanged when the driver refuses (retry).
    Result<void> free();

private:
    PitchedBuffer(detail::OwnedMemory memory, std::size_t width_bytes, std::size_t pitch, std::size_t height,
                  std::size_t depth) noexcept;

    detail::OwnedMemory memory_;
    std::size_t width_bytes_ = 0;
    std::size_t pitch_ = 0;
    std::size_t height_ = 0;
    std::size_t depth_ = 0;
};

}  // namespace cudyn
