// cudyn — PitchedSpan: a view of memory laid out in rows (and layers of
// rows), the shape 2D and 3D copies and 2D sets work on: `width_bytes` used
// bytes in each row, rows `pitch` bytes apart, `height` rows to a layer,
// `depth` layers, one after another. A pitched allocation (PitchedBuffer),
// a tightly packed array (pitch == width) and a sub-image of either are all
// spans; the memory must outlive the span.
//
// Device spans name an address of the unified address space (device,
// managed, mapped, VMM, pool memory); host spans a host pointer (pinned or
// pageable), read-only when made from a const pointer. The shape is checked
// when the span is made: a zero width, height or depth, a pitch below the
// width, or a size that overflows or wraps the address space is
// InvalidArgument.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/stream_ref.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cudyn {

class PitchedSpan;

namespace detail {
// Every element of every row set to `value` of `size` (1, 2 or 4) bytes:
// cuMemsetD2D8 / D2D16 / D2D32; rows of all layers at once.
Result<void> fill_pitched(const PitchedSpan& destination, std::uint32_t value, std::size_t size,
                          const StreamRef* stream);
}  // namespace detail

class PitchedSpan {
public:
    PitchedSpan() noexcept = default;  // empty

    static Result<PitchedSpan> device(CUdeviceptr address, std::size_t width_bytes, std::size_t pitch,
                                      std::size_t height, std::size_t depth = 1);
    static Result<PitchedSpan> host(void* data, std::size_t width_bytes, std::size_t pitch, std::size_t height,
                                    std::size_t depth = 1);
    static Result<PitchedSpan> host(const void* data, std::size_t width_bytes, std::size_t pitch,
                                    std::size_t height, std::size_t depth = 1);

    // The first byte: a device address, or a host pointer's value.
    CUdeviceptr address() const noexcept { return address_; }
    std::size_t width_bytes() const noexcept { return width_bytes_; }
    std::size_t pitch() const noexcept { return pitch_; }
    std::size_t height() const noexcept { return height_; }
    std::size_t depth() const noexcept { return depth_; }
    bool empty() const noexcept { return width_bytes_ == 0; }
    bool is_host() const noexcept { return host_; }
    bool writable() const noexcept { return writable_; }
    // The bytes from the first to past the last used byte (the last row ends
    // at its width, not its pitch); 0 when empty.
    std::size_t extent_bytes() const noexcept {
        return empty() ? 0 : pitch_ * (height_ * depth_ - 1) + width_bytes_;
    }

    // Every element of the used bytes of every row set to `value`: 1-, 2- and
    // 4-byte elements (cuMemsetD2D8 / D2D16 / D2D32), device spans only; the
    // address and the pitch must be multiples of the element size, the
    // width a whole number of elements. With a stream last: on that stream;
    // without, synchronous (done when it returns).
    template <typename T>
    Result<void> fill(const T& value) const {
        return detail::fill_pitched(*this, bits_of(value), sizeof(T), nullptr);
    }
    template <typename T>
    Result<void> fill(const T& value, StreamRef stream) const {
        return detail::fill_pitched(*this, bits_of(value), sizeof(T), &stream);
    }

private:
    template <typename T>
    static std::uint32_t bits_of(const T& value) noexcept {
        static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4,
                      "2D sets fill 1-, 2- and 4-byte elements (cuMemsetD2D8/16/32)");
        std::uint32_t bits = 0;
        if constexpr (sizeof(T) == 1) {
            std::uint8_t v = 0;
            std::memcpy(&v, &value, 1);
            bits = v;
        } else if constexpr (sizeof(T) == 2) {
            std::uint16_t v = 0;
            std::memcpy(&v, &value, 2);
            bits = v;
        } else {
            std::memcpy(&bits, &value, 4);
        }
        return bits;
    }
    static Result<PitchedSpan> make(CUdeviceptr address, std::size_t width_bytes, std::size_t pitch,
                                    std::size_t height, std::size_t depth, bool host, bool writable);

    CUdeviceptr address_ = 0;
    std::size_t width_bytes_ = 0;
    std::size_t pitch_ = 0;
    std::size_t height_ = 0;
    std::size_t depth_ = 0;
    bool host_ = false;
    bool writable_ = false;
};

}  // namespace cudyn
