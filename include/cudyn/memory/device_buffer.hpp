// cudyn — DeviceBuffer<T>: device memory from cuMemAlloc_v2, typed and
// move-only, with synchronous and stream-ordered copies and sets (DeviceSpan's
// rules: a transfer without a stream returns once the device has done it).
//
// Needs a current context (PrimaryContext::activate); the buffer keeps that
// context and is freed in it. Arguments are checked before the driver is
// called: a zero or overflowing size, a null or empty span, a range past the
// end or a moved-from buffer is InvalidArgument naming what was wrong.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/stream_ref.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/memory/host_span.hpp"
#include "cudyn/memory/owned_memory.hpp"

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

    // Where the device sees the first element (0 when empty), for kernels and
    // raw driver calls.
    CUdeviceptr device_address() const noexcept { return this->memory_.device_address(); }
    // The whole buffer as a DeviceSpan (empty when the buffer is).
    DeviceSpan<T> device_span() const noexcept { return DeviceSpan<T>(device_address(), this->size()); }

    // DeviceSpan's transfers over the whole buffer, with an optional stream
    // last (absent: synchronous). For part of the buffer, take
    // device_span().subspan(first, count).
    //
    // Host -> device: the whole span, to the first source.size() elements.
    Result<void> copy_from(HostSpan<const T> source) { return copy_in(source, nullptr); }
    Result<void> copy_from(HostSpan<const T> source, StreamRef stream) { return copy_in(source, &stream); }
    // Device -> host: the first destination.size() elements into the span.
    Result<void> copy_to(HostSpan<T> destination) const { return copy_out(destination, nullptr); }
    Result<void> copy_to(HostSpan<T> destination, StreamRef stream) const { return copy_out(destination, &stream); }
    // Device -> device: all of `source` to the start of this buffer (it must
    // fit and not overlap).
    Result<void> copy_from(DeviceSpan<const T> source) { return copy_in(source, nullptr); }
    Result<void> copy_from(DeviceSpan<const T> source, StreamRef stream) { return copy_in(source, &stream); }
    Result<void> copy_from(const DeviceBuffer& source) { return copy_in(source.device_span(), nullptr); }
    Result<void> copy_from(const DeviceBuffer& source, StreamRef stream) {
        return copy_in(source.device_span(), &stream);
    }

    // Every byte of the buffer set to `value` (cuMemsetD8).
    Result<void> set_bytes(std::uint8_t value) { return set_in(value, nullptr); }
    Result<void> set_bytes(std::uint8_t value, StreamRef stream) { return set_in(value, &stream); }
    // Every element set to `value`, for 1-, 2- and 4-byte elements
    // (cuMemsetD8 / D16 / D32).
    template <typename U = T, std::enable_if_t<sizeof(U) == 1 || sizeof(U) == 2 || sizeof(U) == 4, int> = 0>
    Result<void> fill(const T& value) {
        return fill_in(value, nullptr);
    }
    template <typename U = T, std::enable_if_t<sizeof(U) == 1 || sizeof(U) == 2 || sizeof(U) == 4, int> = 0>
    Result<void> fill(const T& value, StreamRef stream) {
        return fill_in(value, &stream);
    }

private:
    explicit DeviceBuffer(detail::OwnedMemory memory) noexcept : detail::TypedMemory<T>(std::move(memory)) {}

    // Each operation is the span's, after the one check a span cannot make:
    // a buffer that was moved from or freed says so. A null stream means
    // synchronous.
    Result<void> live(const char* operation) const { return this->memory_.require(operation, "DeviceBuffer"); }
    detail::DeviceExtent extent() const noexcept { return {device_address(), this->size(), sizeof(T)}; }
    Result<void> copy_in(HostSpan<const T> source, const StreamRef* stream) {
        CUDYN_TRY(live("DeviceBuffer::copy_from"));
        return detail::copy_host_to_device("DeviceBuffer::copy_from", extent(), 0, source.data(), source.size(),
                                           stream);
    }
    Result<void> copy_out(HostSpan<T> destination, const StreamRef* stream) const {
        CUDYN_TRY(live("DeviceBuffer::copy_to"));
        return detail::copy_device_to_host("DeviceBuffer::copy_to", destination.data(), destination.size(), extent(),
                                           0, stream);
    }
    Result<void> copy_in(DeviceSpan<const T> source, const StreamRef* stream) {
        CUDYN_TRY(live("DeviceBuffer::copy_from"));
        return detail::copy_device_to_device("DeviceBuffer::copy_from", extent(),
                                             {source.device_address(), source.size(), sizeof(T)}, stream);
    }
    Result<void> set_in(std::uint8_t value, const StreamRef* stream) {
        CUDYN_TRY(live("DeviceBuffer::set_bytes"));
        return detail::set_device_bytes("DeviceBuffer::set_bytes", extent(), value, stream);
    }
    Result<void> fill_in(const T& value, const StreamRef* stream) {
        CUDYN_TRY(live("DeviceBuffer::fill"));
        return detail::fill_device("DeviceBuffer::fill", extent(), value, stream);
    }
};

}  // namespace cudyn
