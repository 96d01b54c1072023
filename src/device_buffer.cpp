// cudyn — DeviceBuffer: cuMemAlloc_v2 / cuMemFree_v2, copies and sets.
#include "cudyn/device_buffer.hpp"
#include "cudyn/driver_call.hpp"
#include "memory_internal.hpp"

#include <string>

namespace cudyn::detail {

namespace {

constexpr const char* kOwner = "DeviceBuffer";

// The checks shared by both copy directions: a live buffer, a usable span,
// and a range inside the buffer. Gives the device address and byte count.
struct DeviceRange {
    CUdeviceptr address;
    std::size_t bytes;
};
Result<DeviceRange> host_transfer_range(const OwnedMemory& buffer, std::size_t element_size, std::size_t offset,
                                        const void* host, std::size_t count, const char* operation,
                                        const char* span_name) {
    CUDYN_TRY(buffer.require(operation, kOwner));
    if (host == nullptr)
        return Error::invalid_argument(std::string(operation) + ": " + span_name + " has a null data pointer");
    if (count == 0) return Error::invalid_argument(std::string(operation) + ": " + span_name + " is empty");
    CUDYN_TRY(check_range(offset, count, buffer.bytes() / element_size, operation));
    return DeviceRange{buffer.device_address() + offset * element_size, count * element_size};
}

}  // namespace

Result<void> free_device_memory(std::uintptr_t address) {
    return call_driver(&DriverTable::cuMemFree_v3020, static_cast<CUdeviceptr>(address));
}

Result<OwnedMemory> allocate_device_memory(std::size_t count, std::size_t element_size) {
    auto bytes = checked_bytes(count, element_size, "DeviceBuffer::allocate: count");
    if (!bytes) return bytes.error();
    CUdeviceptr pointer = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemAlloc_v3020, &pointer, *bytes));
    return OwnedMemory(static_cast<std::uintptr_t>(pointer), pointer, *bytes, free_device_memory);
}

Result<void> copy_host_to_device(const OwnedMemory& destination, std::size_t element_size, std::size_t offset,
                                 const void* source, std::size_t count, const StreamRef* stream) {
    auto to = host_transfer_range(destination, element_size, offset, source, count,
                                  stream ? "DeviceBuffer::copy_from_async" : "DeviceBuffer::copy_from", "source");
    if (!to) return to.error();
    if (stream == nullptr) return call_driver(&DriverTable::cuMemcpyHtoD_v3020, to->address, source, to->bytes);
    return call_driver(&DriverTable::cuMemcpyHtoDAsync_v3020, to->address, source, to->bytes, stream->handle());
}

Result<void> copy_device_to_host(void* destination, std::size_t count, const OwnedMemory& source,
                                 std::size_t element_size, std::size_t offset, const StreamRef* stream) {
    auto from = host_transfer_range(source, element_size, offset, destination, count,
                                    stream ? "DeviceBuffer::copy_to_async" : "DeviceBuffer::copy_to", "destination");
    if (!from) return from.error();
    if (stream == nullptr)
        return call_driver(&DriverTable::cuMemcpyDtoH_v3020, destination, from->address, from->bytes);
    return call_driver(&DriverTable::cuMemcpyDtoHAsync_v3020, destination, from->address, from->bytes,
                       stream->handle());
}

Result<void> copy_device_to_device(const OwnedMemory& destination, const OwnedMemory& source,
                                   const StreamRef* stream) {
    const char* operation = stream ? "DeviceBuffer::copy_from_async" : "DeviceBuffer::copy_from";
    CUDYN_TRY(destination.require(operation, kOwner));
    if (source.empty())
        return Error::invalid_argument(std::string(operation) + ": source is empty (moved from or freed)");
    if (source.device_address() == destination.device_address())
        return Error::invalid_argument(std::string(operation) + ": source is the destination buffer itself");
    if (source.bytes() > destination.bytes())
        return Error::invalid_argument(std::string(operation) + ": source (" + std::to_string(source.bytes()) +
                                       " bytes) does not fit the destination (" +
                                       std::to_string(destination.bytes()) + " bytes)");
    if (stream != nullptr)
        return call_driver(&DriverTable::cuMemcpyDtoDAsync_v3020, destination.device_address(),
                           source.device_address(), source.bytes(), stream->handle());
    return call_driver(&DriverTable::cuMemcpyDtoD_v3020, destination.device_address(), source.device_address(),
                       source.bytes());
}

Result<void> set_device_bytes(const OwnedMemory& destination, std::uint8_t value, const StreamRef* stream) {
    CUDYN_TRY(destination.require(stream ? "DeviceBuffer::set_bytes_async" : "DeviceBuffer::set_bytes", kOwner));
    if (stream != nullptr)
        return call_driver(&DriverTable::cuMemsetD8Async_v3020, destination.device_address(),
                           static_cast<unsigned char>(value), destination.bytes(), stream->handle());
    return call_driver(&DriverTable::cuMemsetD8_v3020, destination.device_address(),
                       static_cast<unsigned char>(value), destination.bytes());
}

Result<void> set_device_words(const OwnedMemory& destination, std::uint32_t value, const StreamRef* stream) {
    CUDYN_TRY(destination.require(stream ? "DeviceBuffer::fill_async" : "DeviceBuffer::fill", kOwner));
    const std::size_t words = destination.bytes() / 4;
    if (stream != nullptr)
        return call_driver(&DriverTable::cuMemsetD32Async_v3020, destination.device_address(),
                           static_cast<unsigned int>(value), words, stream->handle());
    return call_driver(&DriverTable::cuMemsetD32_v3020, destination.device_address(),
                       static_cast<unsigned int>(value), words);
}

}  // namespace cudyn::detail
