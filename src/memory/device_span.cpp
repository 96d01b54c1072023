// cudyn — the checked copies and sets behind DeviceSpan and DeviceBuffer.
#include "cudyn/memory/device_span.hpp"
#include "cudyn/memory/peer_copy.hpp"
#include "cudyn/detail/size_checks.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "core/internal.hpp"
#include "memory/internal.hpp"
#include "device/internal.hpp"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

namespace cudyn::detail {

namespace {

struct DeviceBytes {
    CUdeviceptr address;
    std::size_t bytes;
};

std::string bytes_text(std::size_t bytes) { return std::to_string(bytes) + " bytes"; }

// The byte size of a side of a transfer that is there; `role` names it in
// errors. A span made by hand (DeviceSpan(address, count)) may claim more
// elements than size_t bytes can count; the driver would get a wrapped size.
Result<std::size_t> extent_bytes(const char* operation, DeviceExtent extent, const char* role) {
    if (extent.address == 0 || extent.count == 0) return Operation(operation).invalid(std::string(role) + " is empty");
    const std::string what = std::string(operation) + ": " + role;
    CUDYN_TRY_ASSIGN(const std::size_t bytes, byte_size(extent.count, extent.element_size, what.c_str()));
    CUDYN_TRY(check_address_range(extent.address, bytes, what.c_str()));
    return bytes;
}

// The checks shared by both host directions, in a fixed order: a device side
// that is there, a usable host span, a range inside the device side. Gives the
// device address and byte count of the transfer.
Result<DeviceBytes> host_transfer_range(const char* operation, DeviceExtent device, std::size_t offset,
                                        const void* host, std::size_t count, const char* span_name) {
    CUDYN_TRY(extent_bytes(operation, device, "the device span"));
    const Operation caller(operation);
    if (host == nullptr) return caller.invalid(std::string(span_name) + " has a null data pointer");
    if (count == 0) return caller.invalid(std::string(span_name) + " is empty");
    CUDYN_TRY(check_range(offset, count, device.count, operation));
    return DeviceBytes{device.address + offset * device.element_size, count * device.element_size};
}

// The unified copy (cuMemcpy / cuMemcpyAsync): the driver tells each side's
// kind from its address. A host pointer passes as its own address.
Result<void> unified_copy(CUdeviceptr to, CUdeviceptr from, std::size_t bytes, const StreamRef* stream) {
    if (stream == nullptr)
        return finish_on_legacy_stream(call_driver(&DriverTable::cuMemcpy_v4000, to, from, bytes));
    return in_stream_context(*stream, [&] {
        return call_driver(&DriverTable::cuMemcpyAsync_v4000, to, from, bytes, stream->handle());
    });
}

CUdeviceptr host_address(const void* pointer) {
    return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(pointer));
}

// A typed copy the driver refused with INVALID_VALUE, of memory that belongs
// to a pool (one attribute query, on this path only): the pool may lie at a
// host location, whose memory only the unified copy takes, so that copy is
// made. When it is refused too, the typed copy's answer is the one reported.
Result<void> unless_pool_memory(Result<void> typed, std::initializer_list<CUdeviceptr> device_sides, CUdeviceptr to,
                                CUdeviceptr from, std::size_t bytes, const StreamRef* stream) {
    if (typed || typed.error().driver_result != CUDA_ERROR_INVALID_VALUE) return typed;
    bool pooled = false;
    for (const CUdeviceptr side : device_sides) pooled = pooled || pool_of(side) != nullptr;
    if (!pooled) return typed;
    if (unified_copy(to, from, bytes, stream)) return ok();
    return typed;
}

}  // namespace

Result<void> finish_on_legacy_stream(Result<void> issued) {
    CUDYN_TRY(std::move(issued));
    return call_driver(&DriverTable::cuStreamSynchronize_v2000, CU_STREAM_LEGACY);
}

Result<void> copy_host_to_device(const char* operation, DeviceExtent destination, std::size_t offset,
                                 const void* source, std::size_t count, const StreamRef* stream, CopyRoute route) {
    CUDYN_TRY_ASSIGN(auto to, host_transfer_range(operation, destination, offset, source, count, "source"));
    if (route == CopyRoute::Unified) return unified_copy(to.address, host_address(source), to.bytes, stream);
    auto typed = stream == nullptr
                     ? finish_on_legacy_stream(
                           call_driver(&DriverTable::cuMemcpyHtoD_v3020, to.address, source, to.bytes))
                     : in_stream_context(*stream, [&] {
                           return call_driver(&DriverTable::cuMemcpyHtoDAsync_v3020, to.address, source, to.bytes,
                                              stream->handle());
                       });
    return unless_pool_memory(std::move(typed), {to.address}, to.address, host_address(source), to.bytes, stream);
}

Result<void> copy_device_to_host(const char* operation, void* destination, std::size_t count, DeviceExtent source,
                                 std::size_t offset, const StreamRef* stream, CopyRoute route) {
    CUDYN_TRY_ASSIGN(auto from, host_transfer_range(operation, source, offset, destination, count, "destination"));
    if (route == CopyRoute::Unified) return unified_copy(host_address(destination), from.address, from.bytes, stream);
    auto typed = stream == nullptr
                     ? call_driver(&DriverTable::cuMemcpyDtoH_v3020, destination, from.address, from.bytes)
                     : in_stream_context(*stream, [&] {
                           return call_driver(&DriverTable::cuMemcpyDtoHAsync_v3020, destination, from.address,
                                              from.bytes, stream->handle());
                       });
    return unless_pool_memory(std::move(typed), {from.address}, host_address(destination), from.address, from.bytes,
                              stream);
}

Result<void> copy_device_to_device(const char* operation, DeviceExtent destination, DeviceExtent source,
                                   const StreamRef* stream, CopyRoute route) {
    CUDYN_TRY_ASSIGN(const std::size_t destination_bytes, extent_bytes(operation, destination, "the destination"));
    CUDYN_TRY_ASSIGN(const std::size_t source_bytes, extent_bytes(operation, source, "source"));
    const Operation caller(operation);
    if (source.address == destination.address) return caller.invalid("source is the destination itself");
    if (source_bytes > destination_bytes)
        return caller.invalid("source (" + bytes_text(source_bytes) + ") does not fit the destination (" +
                              bytes_text(destination_bytes) + ")");
    // The driver's copies are memcpy, not memmove: overlapping ranges give
    // whatever order the copy engine happens to use.
    const bool overlap = source.address < destination.address + source_bytes &&
                         destination.address < source.address + source_bytes;
    if (overlap) return caller.invalid("source and destination overlap");
    if (route == CopyRoute::Unified) return unified_copy(destination.address, source.address, source_bytes, stream);
    auto typed = stream != nullptr
                     ? in_stream_context(*stream, [&] {
                           return call_driver(&DriverTable::cuMemcpyDtoDAsync_v3020, destination.address,
                                              source.address, source_bytes, stream->handle());
                       })
                     : finish_on_legacy_stream(call_driver(&DriverTable::cuMemcpyDtoD_v3020, destination.address,
                                                           source.address, source_bytes));
    return unless_pool_memory(std::move(typed), {destination.address, source.address}, destination.address,
                              source.address, source_bytes, stream);
}

Result<void> set_device_bytes(const char* operation, DeviceExtent destination, std::uint8_t value,
                              const StreamRef* stream) {
    CUDYN_TRY_ASSIGN(const std::size_t bytes, extent_bytes(operation, destination, "the destination"));
    const auto byte = static_cast<unsigned char>(value);
    if (stream != nullptr)
        return in_stream_context(*stream, [&] {
            return call_driver(&DriverTable::cuMemsetD8Async_v3020, destination.address, byte, bytes, stream->handle());
        });
    return finish_on_legacy_stream(call_driver(&DriverTable::cuMemsetD8_v3020, destination.address, byte, bytes));
}

Result<void> set_device_words(const char* operation, DeviceExtent destination, std::uint32_t value, std::size_t size,
                              const StreamRef* stream) {
    CUDYN_TRY_ASSIGN(const std::size_t bytes, extent_bytes(operation, destination, "the destination"));
    // cuMemsetD16 / D32 need an aligned address; say so instead of passing
    // on the driver's bare INVALID_VALUE.
    if (destination.address % size != 0 || bytes % size != 0)
        return Operation(operation).invalid("a " + std::to_string(size * 8) + "-bit fill needs a " +
                                            std::to_string(size) +
                                            "-byte-aligned address and a whole number of elements");
    const std::size_t count = bytes / size;
    const CUdeviceptr to = destination.address;
    if (stream != nullptr)
        return in_stream_context(*stream, [&] {
            if (size == 2)
                return call_driver(&DriverTable::cuMemsetD16Async_v3020, to, static_cast<unsigned short>(value), count,
                                   stream->handle());
            return call_driver(&DriverTable::cuMemsetD32Async_v3020, to, static_cast<unsigned int>(value), count,
                               stream->handle());
        });
    if (size == 2)
        return finish_on_legacy_stream(
            call_driver(&DriverTable::cuMemsetD16_v3020, to, static_cast<unsigned short>(value), count));
    return finish_on_legacy_stream(
        call_driver(&DriverTable::cuMemsetD32_v3020, to, static_cast<unsigned int>(value), count));
}

Result<void> check_device_view(CUdeviceptr address, std::size_t bytes, std::size_t element_size,
                               std::size_t alignment) {
    constexpr Operation kFromBytes{"DeviceSpan::from_bytes"};
    if (bytes == 0) return ok();  // the empty span, wherever it points
    if (address == 0) return kFromBytes.invalid(bytes_text(bytes) + " at address 0");
    if (bytes % element_size != 0)
        return kFromBytes.invalid(bytes_text(bytes) + " is not a whole number of " + std::to_string(element_size) +
                                  "-byte elements");
    if (address % alignment != 0)
        return kFromBytes.invalid("address is not aligned to the element's " + std::to_string(alignment) + " bytes");
    return ok();
}

Result<void> check_subspan(std::size_t first, std::size_t count, std::size_t size) {
    // An empty view is valid anywhere up to the end, as for std::span.
    if (first <= size && count <= size - first) return ok();
    constexpr Operation kSubspan{"DeviceSpan::subspan"};
    return kSubspan.invalid("elements [" + std::to_string(first) + ", " + std::to_string(first) + " + " +
                            std::to_string(count) + ") run past the " + std::to_string(size) + " of the span");
}

}  // namespace cudyn::detail

namespace cudyn::detail {

Result<void> copy_peer_bytes(DeviceExtent destination, CUcontext destination_context, DeviceExtent source,
                             CUcontext source_context, const StreamRef* stream) {
    constexpr const char* kName = "copy_peer";
    if (destination_context == nullptr) return Operation(kName).invalid("the destination context is empty");
    if (source_context == nullptr) return Operation(kName).invalid("the source context is empty");
    CUDYN_TRY_ASSIGN(const std::size_t destination_bytes, extent_bytes(kName, destination, "the destination"));
    CUDYN_TRY_ASSIGN(const std::size_t source_bytes, extent_bytes(kName, source, "source"));
    if (source_bytes > destination_bytes)
        return Operation(kName).invalid("source (" + bytes_text(source_bytes) + ") does not fit the destination (" +
                                        bytes_text(destination_bytes) + ")");
    const bool overlap = source.address < destination.address + source_bytes &&
                         destination.address < source.address + source_bytes;
    if (overlap) return Operation(kName).invalid("source and destination overlap");
    // The caller's context is put back, or the error says it is not.
    Result<void> copied = ok();
    if (stream != nullptr) {
        copied = in_stream_context(*stream, [&] {
            return call_driver(&DriverTable::cuMemcpyPeerAsync_v4000, destination.address, destination_context,
                               source.address, source_context, source_bytes, stream->handle());
        });
    } else {
        copied = in_context(destination_context, [&] {
            return finish_on_legacy_stream(call_driver(&DriverTable::cuMemcpyPeer_v4000, destination.address,
                                                       destination_context, source.address, source_context,
                                                       source_bytes));
        });
    }
    if (!copied) return Operation(kName).context(std::move(copied).error());
    return ok();
}

}  // namespace cudyn::detail
