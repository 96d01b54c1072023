// cudyn — PitchedSpan's checks and its 2D sets (cuMemsetD2D8/16/32).
#include "cudyn/memory/pitched_span.hpp"
#include "cudyn/detail/size_checks.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "core/internal.hpp"
#include "device/internal.hpp"
#include "memory/internal.hpp"

#include <string>

namespace cudyn {

Result<PitchedSpan> PitchedSpan::make(CUdeviceptr address, std::size_t width_bytes, std::size_t pitch,
                                      std::size_t height, std::size_t depth, bool host, bool writable) {
    const detail::Operation caller(host ? "PitchedSpan::host" : "PitchedSpan::device");
    if (address == 0) return caller.invalid(host ? "the data pointer is null" : "the address is 0");
    if (width_bytes == 0) return caller.invalid("the width is 0 bytes");
    if (height == 0) return caller.invalid("the height is 0 rows");
    if (depth == 0) return caller.invalid("the depth is 0 layers");
    if (pitch < width_bytes)
        return caller.invalid("the pitch (" + std::to_string(pitch) + " bytes) is below the width (" +
                              std::to_string(width_bytes) + " bytes): rows would overlap");
    CUDYN_TRY_ASSIGN(const std::size_t rows, detail::byte_size(height, depth, (caller.name() + std::string(": height x depth")).c_str()));
    CUDYN_TRY_ASSIGN(const std::size_t before_last,
                     detail::byte_size(rows - 1, pitch, (caller.name() + std::string(": rows x pitch")).c_str()));
    if (before_last > static_cast<std::size_t>(-1) - width_bytes)
        return caller.invalid("the span's size overflows (" + std::to_string(rows) + " rows of pitch " +
                              std::to_string(pitch) + ")");
    CUDYN_TRY(detail::check_address_range(address, before_last + width_bytes, caller.name()));
    PitchedSpan span;
    span.address_ = address;
    span.width_bytes_ = width_bytes;
    span.pitch_ = pitch;
    span.height_ = height;
    span.depth_ = depth;
    span.host_ = host;
    span.writable_ = writable;
    return span;
}

Result<PitchedSpan> PitchedSpan::device(CUdeviceptr address, std::size_t width_bytes, std::size_t pitch,
                                        std::size_t height, std::size_t depth) {
    return make(address, width_bytes, pitch, height, depth, false, true);
}

Result<PitchedSpan> PitchedSpan::host(void* data, std::size_t width_bytes, std::size_t pitch, std::size_t height,
                                      std::size_t depth) {
    return make(static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(data)), width_bytes, pitch, height, depth,
                true, true);
}

Result<PitchedSpan> PitchedSpan::host(const void* data, std::size_t width_bytes, std::size_t pitch,
                                      std::size_t height, std::size_t depth) {
    return make(static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(data)), width_bytes, pitch, height, depth,
                true, false);
}

namespace detail {

Result<void> fill_pitched(const PitchedSpan& destination, std::uint32_t value, std::size_t size,
                          const StreamRef* stream) {
    constexpr Operation kFill{"PitchedSpan::fill"};
    if (destination.empty()) return kFill.invalid("the span is empty");
    if (destination.is_host()) return kFill.invalid("2D sets write device memory; the span is host memory");
    const std::string element = std::to_string(size) + "-byte";
    if (destination.address() % size != 0 || destination.pitch() % size != 0)
        return kFill.invalid("a " + element + " fill needs the address and the pitch to be multiples of " +
                             std::to_string(size));
    if (destination.width_bytes() % size != 0)
        return kFill.invalid("the width (" + std::to_string(destination.width_bytes()) +
                             " bytes) is not a whole number of " + element + " elements");
    const CUdeviceptr to = destination.address();
    const std::size_t pitch = destination.pitch();
    const std::size_t width = destination.width_bytes() / size;
    // Layers follow one another, so every row of every layer is one 2D set.
    const std::size_t rows = destination.height() * destination.depth();
    if (stream != nullptr) {
        return in_stream_context(*stream, [&] {
            const CUstream s = stream->handle();
            if (size == 1)
                return call_driver(&DriverTable::cuMemsetD2D8Async_v3020, to, pitch,
                                   static_cast<unsigned char>(value), width, rows, s);
            if (size == 2)
                return call_driver(&DriverTable::cuMemsetD2D16Async_v3020, to, pitch,
                                   static_cast<unsigned short>(value), width, rows, s);
            return call_driver(&DriverTable::cuMemsetD2D32Async_v3020, to, pitch, static_cast<unsigned int>(value),
                               width, rows, s);
        });
    }
    if (size == 1)
        return finish_on_legacy_stream(call_driver(&DriverTable::cuMemsetD2D8_v3020, to, pitch,
                                                   static_cast<unsigned char>(value), width, rows));
    if (size == 2)
        return finish_on_legacy_stream(call_driver(&DriverTable::cuMemsetD2D16_v3020, to, pitch,
                                                   static_cast<unsigned short>(value), width, rows));
    return finish_on_legacy_stream(
        call_driver(&DriverTable::cuMemsetD2D32_v3020, to, pitch, static_cast<unsigned int>(value), width, rows));
}

}  // namespace detail

}  // namespace cudyn
