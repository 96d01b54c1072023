// cudyn — DeviceBuffer<T>: device memory from cuMemAlloc_v2, typed and
// move-only, with synchronous and stream-ordered copies and sets.
//
//     auto buffer = cudyn::DeviceBuffer<float>::allocate(n);   // Result<DeviceBuffer<float>>
//     CUDYN_TRY(buffer->copy_from(host_vector));
//     kernel_argument = buffer->device_pointer();
//
// Needs a current context (PrimaryContext::activate). Every operation checks
// its arguments before calling the driver: a zero or overflowing size, a null
// or empty span, a range past the end, or a moved-from buffer give
// InvalidArgument naming what was wrong.
#pragma once

#include "cudyn/host_span.hpp"
#include "cudyn/owned_memory.hpp"
#include "cudyn/result.hpp"
#include "cudyn/stream_ref.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace cudyn {

namespace detail {
// The untyped work behind DeviceBuffer<T>. Offsets and counts are in elements
// of element_size; a null stream means synchronous.
Result<OwnedMemory> allocate_device_memory(std::size_t count, std::size_t element_size);
Result<void> copy_host_to_device(const OwnedMemory& destination, std::size_t element_size, std::size_t offset,
                                 const void* source, std::size_t count, const StreamRef* stream);
Result<void> copy_device_to_host(void* destination, std::size_t count, const OwnedMemory& source,
                                 std::size_t element_size, std::size_t offset, const StreamRef* stream);
Result<void> copy_device_to_device(const OwnedMemory& destination, const OwnedMemory& source,
                                   const StreamRef* stream);
Result<void> set_device_bytes(const OwnedMemory& destination, std::uint8_t value, const StreamRef* stream);
Result<void> set_device_words(const OwnedMemory& destination, std::uint32_t value, const StreamRef* stream);
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

    // Host -> device: the whole span, to elements [offset, offset + source.size()).
    Result<void> copy_from(HostSpan<const T> source, std::size_t offset = 0) {
        return detail::copy_host_to_device(this->memory_, sizeof(T), offset, source.data(), source.size(), nullptr);
    }
    Result<void> copy_from_async(HostSpan<const T> source, StreamRef stream, std::size_t offset = 0) {
        return detail::copy_host_to_device(this->memory_, sizeof(T), offset, source.data(), source.size(), &stream);
    }
    // Device -> host: elements [offset, offset + destination.size()) into the span.
    Result<void> copy_to(HostSpan<T> destination, std::size_t offset = 0) const {
        return detail::copy_device_to_host(destination.data(), destination.size(), this->memory_, sizeof(T), offset,
                                           nullptr);
    }
    Result<void> copy_to_async(HostSpan<T> destination, StreamRef stream, std::size_t offset = 0) const {
        return detail::copy_device_to_host(destination.data(), destination.size(), this->memory_, sizeof(T), offset,
                                           &stream);
    }
    // Device -> device: all of `source` to the start of this buffer (it must fit).
    Result<void> copy_from(const DeviceBuffer& source) {
        return detail::copy_device_to_device(this->memory_, source.memory_, nullptr);
    }
    Result<void> copy_from_async(const DeviceBuffer& source, StreamRef stream) {
        return detail::copy_device_to_device(this->memory_, source.memory_, &stream);
    }

    // Every byte of the buffer set to `value` (cuMemsetD8).
    Result<void> set_bytes(std::uint8_t value) { return detail::set_device_bytes(this->memory_, value, nullptr); }
    Result<void> set_bytes_async(std::uint8_t value, StreamRef stream) {
        return detail::set_device_bytes(this->memory_, value, &stream);
    }
    // Every element set to `value`, for 4-byte elements (cuMemsetD32).
    template <typename U = T, std::enable_if_t<sizeof(U) == 4, int> = 0>
    Result<void> fill(const T& value) {
        return detail::set_device_words(this->memory_, as_word(value), nullptr);
    }
    template <typename U = T, std::enable_if_t<sizeof(U) == 4, int> = 0>
    Result<void> fill_async(const T& value, StreamRef stream) {
        return detail::set_device_words(this->memory_, as_word(value), &stream);
    }

private:
    explicit DeviceBuffer(detail::OwnedMemory memory) noexcept : detail::TypedMemory<T>(std::move(memory)) {}
    static std::uint32_t as_word(const T& value) noexcept {
        std::uint32_t word = 0;
        std::memcpy(&word, &value, sizeof word);
        return word;
    }
};

}  // namespace cudyn
