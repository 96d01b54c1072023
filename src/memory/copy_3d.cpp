// cudyn — 2D and 3D copies between pitched spans (cuMemcpy2D / cuMemcpy3D and
// their Async forms), checked before the driver sees them.
#include "cudyn/memory/copy_3d.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "core/internal.hpp"
#include "device/internal.hpp"
#include "memory/internal.hpp"

#include <string>

namespace cudyn {

namespace detail {

namespace {

// "first + count" past `limit`, without overflow.
bool runs_past(std::size_t first, std::size_t count, std::size_t limit) {
    return first > limit || count > limit - first;
}

Result<void> check_box(const Operation& caller, const char* role, const PitchedSpan& span, const Offset3D& offset,
                       const Extent3D& extent) {
    const std::string side(role);
    if (span.empty()) return caller.invalid("the " + side + " span is empty");
    const auto past = [&](const char* what, std::size_t first, std::size_t count, std::size_t limit) {
        return caller.invalid("the " + side + " box runs past its span: " + what + " " + std::to_string(first) +
                              " + " + std::to_string(count) + " > " + std::to_string(limit));
    };
    if (runs_past(offset.x_bytes, extent.width_bytes, span.width_bytes()))
        return past("bytes", offset.x_bytes, extent.width_bytes, span.width_bytes());
    if (runs_past(offset.y, extent.height, span.height())) return past("rows", offset.y, extent.height, span.height());
    if (runs_past(offset.z, extent.depth, span.depth())) return past("layers", offset.z, extent.depth, span.depth());
    return ok();
}

}  // namespace

Result<void> check_pitched_copy(const PitchedCopy& copy, const char* operation) {
    const Operation caller(operation);
    if (copy.extent.width_bytes == 0 || copy.extent.height == 0 || copy.extent.depth == 0)
        return caller.invalid("the extent is empty (" + std::to_string(copy.extent.width_bytes) + " bytes x " +
                              std::to_string(copy.extent.height) + " rows x " + std::to_string(copy.extent.depth) +
                              " layers)");
    CUDYN_TRY(check_box(caller, "destination", copy.destination, copy.destination_offset, copy.extent));
    CUDYN_TRY(check_box(caller, "source", copy.source, copy.source_offset, copy.extent));
    if (!copy.destination.writable()) return caller.invalid("the destination is read-only host memory");
    return ok();
}

// Inside the span, so no overflow: the span's own size was checked.
CUdeviceptr pitched_address(const PitchedSpan& span, const Offset3D& offset) noexcept {
    const std::size_t row = offset.z * span.height() + offset.y;
    return span.address() + row * span.pitch() + offset.x_bytes;
}

CUDA_MEMCPY3D copy_descriptor(const PitchedCopy& copy) noexcept {
    CUDA_MEMCPY3D d{};
    const auto side = [](const PitchedSpan& span, CUmemorytype& type, const void*& host, CUdeviceptr& device) {
        if (span.is_host()) {
            type = CU_MEMORYTYPE_HOST;
            host = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(span.address()));
        } else {
            type = CU_MEMORYTYPE_UNIFIED;
            device = span.address();
        }
    };
    const void* source_host = nullptr;
    const void* destination_host = nullptr;
    side(copy.source, d.srcMemoryType, source_host, d.srcDevice);
    side(copy.destination, d.dstMemoryType, destination_host, d.dstDevice);
    d.srcHost = source_host;
    d.dstHost = const_cast<void*>(destination_host);  // checked writable
    d.srcXInBytes = copy.source_offset.x_bytes;
    d.srcY = copy.source_offset.y;
    d.srcZ = copy.source_offset.z;
    d.srcPitch = copy.source.pitch();
    d.srcHeight = copy.source.height();
    d.dstXInBytes = copy.destination_offset.x_bytes;
    d.dstY = copy.destination_offset.y;
    d.dstZ = copy.destination_offset.z;
    d.dstPitch = copy.destination.pitch();
    d.dstHeight = copy.destination.height();
    d.WidthInBytes = copy.extent.width_bytes;
    d.Height = copy.extent.height;
    d.Depth = copy.extent.depth;
    return d;
}

namespace {

constexpr const char* kCopy2d = "copy_2d";
constexpr const char* kCopy3d = "copy_3d";

Result<CUDA_MEMCPY2D> descriptor_2d(const PitchedCopy& copy) {
    CUDYN_TRY(check_pitched_copy(copy, kCopy2d));
    if (copy.extent.depth != 1)
        return Operation(kCopy2d).invalid("a 2D copy moves one layer; the extent has " +
                                          std::to_string(copy.extent.depth) + " (use copy_3d)");
    // A layer other than the first is rows further on.
    const CUDA_MEMCPY3D d = copy_descriptor(copy);
    CUDA_MEMCPY2D flat{};
    flat.srcMemoryType = d.srcMemoryType;
    flat.srcHost = d.srcHost;
    flat.srcDevice = d.srcDevice;
    flat.srcXInBytes = d.srcXInBytes;
    flat.srcY = copy.source_offset.z * copy.source.height() + copy.source_offset.y;
    flat.srcPitch = d.srcPitch;
    flat.dstMemoryType = d.dstMemoryType;
    flat.dstHost = d.dstHost;
    flat.dstDevice = d.dstDevice;
    flat.dstXInBytes = d.dstXInBytes;
    flat.dstY = copy.destination_offset.z * copy.destination.height() + copy.destination_offset.y;
    flat.dstPitch = d.dstPitch;
    flat.WidthInBytes = d.WidthInBytes;
    flat.Height = d.Height;
    return flat;
}

}  // namespace

}  // namespace detail

Result<void> copy_2d(const PitchedCopy& copy) {
    CUDYN_TRY_ASSIGN(const CUDA_MEMCPY2D d, detail::descriptor_2d(copy));
    return detail::finish_on_legacy_stream(call_driver(&DriverTable::cuMemcpy2D_v3020, &d));
}

Result<void> copy_2d(const PitchedCopy& copy, StreamRef stream) {
    CUDYN_TRY_ASSIGN(const CUDA_MEMCPY2D d, detail::descriptor_2d(copy));
    return detail::in_stream_context(
        stream, [&] { return call_driver(&DriverTable::cuMemcpy2DAsync_v3020, &d, stream.handle()); });
}

Result<void> copy_3d(const PitchedCopy& copy) {
    CUDYN_TRY(detail::check_pitched_copy(copy, detail::kCopy3d));
    const CUDA_MEMCPY3D d = detail::copy_descriptor(copy);
    return detail::finish_on_legacy_stream(call_driver(&DriverTable::cuMemcpy3D_v3020, &d));
}

Result<void> copy_3d(const PitchedCopy& copy, StreamRef stream) {
    CUDYN_TRY(detail::check_pitched_copy(copy, detail::kCopy3d));
    const CUDA_MEMCPY3D d = detail::copy_descriptor(copy);
    return detail::in_stream_context(
        stream, [&] { return call_driver(&DriverTable::cuMemcpy3DAsync_v3020, &d, stream.handle()); });
}

}  // namespace cudyn
