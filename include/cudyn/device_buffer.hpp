// cudyn — DeviceBuffer<T>: device memory from cuMemAlloc_v2, typed and
// move-only, with synchronous and stream-ordered copies and sets.
//
//     auto buffer = cudyn::DeviceBuffer<float>::allocate(n);   // Result<DeviceBuffer<float>>
//     CUDYN_TRY(buffer->copy_from(host_vector));
//     kernel_argument = buffer->device_pointer();
//
// The forms without a stream return once the device has done the work
// (DeviceSpan's rule); the _async forms enqueue and return. The buffer keeps
// the context it was allocated in and is freed there (cuMemFree waits for
// that context's work first).
//
// Needs a current context (PrimaryContext::activate). Every operation checks
// its arguments before calling the driver: a zero or overflowing size, a null
// or empty span, a range past the end, or a moved-from buffer give
// InvalidArgument naming what was wrong.
#pragma once

#include "cudyn/device_span.hpp"
#include "cudyn/host_span.hpp"
#include "cudyn/owned_memory.hpp"
#include "cudyn/result.hpp"
#include "cudyn/stream_ref.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace cudyn {

namespace detail {
Result<OwnedMemory> allocate_device_memory(std::size_t count, std::size_t element_size);
}  // namespace detail

template <typename T>
class DeviceBuffer : public detail::TypedMemory<T> {
public:
    // `count` elements of uninitialised device memory in the current context.
    static Result<DeviceBuffer> allocate(std::size_t count) {
        return detail::adopt<DeviceBuffer>(detail::allocate_device_memory(count, sizeof(T)),
                                           [](detail::OwnedMemory memory) { return DeviceBuffer(std::move(memory)); });
    }

    DeviceBuffer() noexcept = default;  // empty

    // The raw device address (0 when empty), for kernels and raw driver calls.
    CUdeviceptr data() const noexcept { return this->memory_.device_address(); }
    CUdeviceptr device_pointer() const noexcept { return data(); }
    // The whole buffer as a DeviceSpan (empty when the buffer is).
    DeviceSpan<T> device_span() const noexcept { return DeviceSpan<T>(data(), this->size()); }

    // Host -> device: the whole span, to elements [offset, offset + source.size()).
    Result<void> copy_from(HostSpan<const T> source, std::size_t offset = 0) {
        return copy_in("DeviceBuffer::copy_from", source, offset, nullptr);
    }
    Result<void> copy_from_async(HostSpan<const T> source, StreamRef stream, std::size_t offset = 0) {
        return copy_in("DeviceBuffer::copy_from_async", source, offset, &stream);
    }
    // Device -> host: elements [offset, offset + destination.size()) into the span.
    Result<void> copy_to(HostSpan<T> destination, std::size_t offset = 0) const {
        return copy_out("DeviceBuffer::copy_to", destination, offset, nullptr);
    }
    Result<void> copy_to_async(HostSpan<T> destination, StreamRef stream, std::size_t offset = 0) const {
        return copy_out("DeviceBuffer::copy_to_async", destination, offset, &stream);
    }
    // Device -> device: all of `source` to the start of this buffer (it must fit).
    Result<void> copy_from(const DeviceBuffer& source) { return copy_in("DeviceBuffer::copy_from", source, nullptr); }
    Result<void> copy_from_async(const DeviceBuffer& source, StreamRef stream) {
        return copy_in("DeviceBuffer::copy_from_async", source, &stream);
    }

    // Every byte of the buffer set to `value` (cuMemsetD8).
    Result<void> set_bytes(std::uint8_t value) { return set_in("DeviceBuffer::set_bytes", value, nullptr); }
    Result<void> set_bytes_async(std::uint8_t value, StreamRef stream) {
        return set_in("DeviceBuffer::set_bytes_async", value, &stream);
    }
    // Every element set to `value`, for 4-byte elements (cuMemsetD32).
    template <typename U = T, std::enable_if_t<sizeof(U) == 4, int> = 0>
    Result<void> fill(const T& value) {
        return fill_in("DeviceBuffer::fill", value, nullptr);
    }
    template <typename U = T, std::enable_if_t<sizeof(U) == 4, int> = 0>
    Result<void> fill_async(const T& value, StreamRef stream) {
        return fill_in("DeviceBuffer::fill_async", value, &stream);
    }

private:
    explicit DeviceBuffer(detail::OwnedMemory memory) noexcept : detail::TypedMemory<T>(std::move(memory)) {}

    // Each operation is the span's, after the one check a span cannot make:
    // a buffer that was moved from or freed says so.
    Result<void> live(const char* operation) const { return this->memory_.require(operation, "DeviceBuffer"); }
    detail::DeviceExtent extent() const noexcept { return {data(), this->size(), sizeof(T)}; }
    Result<void> copy_in(const char* operation, HostSpan<const T> source, std::size_t offset, const StreamRef* stream) {
        CUDYN_TRY(live(operation));
        return detail::copy_host_to_device(operation, extent(), offset, source.data(), source.size(), stream);
    }
    Result<void> copy_out(const char* operation, HostSpan<T> destination, std::size_t offset,
                          const StreamRef* stream) const {
        CUDYN_TRY(live(operation));
        return detail::copy_device_to_host(operation, destination.data(), destination.size(), extent(), offset, stream);
    }
    Result<void> copy_in(const char* operation, const DeviceBuffer& source, const StreamRef* stream) {
        CUDYN_TRY(live(operation));
        return detail::copy_device_to_device(operation, extent(), source.extent(), stream);
    }
    Result<void> set_in(const char* operation, std::uint8_t value, const StreamRef* stream) {
        CUDYN_TRY(live(operation));
        return detail::set_device_bytes(operation, extent(), value, stream);
    }
    Result<void> fill_in(const char* operation, const T& value, const StreamRef* stream) {
        CUDYN_TRY(live(operation));
        return detail::fill_device(operation, extent(), value, stream);
    }
};

}  // namespace cudyn
