// cudyn — DeviceSpan<T>: a typed, non-owning view of memory the device
// addresses (any buffer, mapping or imported allocation gives one), with the
// copies and fills they all share. The memory must outlive the span; a span
// of a freed or moved-from buffer is empty, and every operation on it is
// refused.
//
// Every transfer takes an optional stream last. Without one it returns once
// the device has done the work, so it is ordered before anything enqueued
// next, on any stream; with one it is enqueued there. Arguments are checked
// before the driver is called (an empty span, a null or empty host span, a
// source that does not fit, overlapping device ranges: InvalidArgument).
// Memory of a pool at a host location is copied too: the typed copy the
// driver refuses for it is made again unified (detail::CopyRoute).
// DeviceSpan<const T> is the read-only view; a DeviceSpan<T> converts to it.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/stream_ref.hpp"
#include "cudyn/memory/host_span.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace cudyn {

namespace detail {

// Device-addressed elements as a transfer sees them.
struct DeviceExtent {
    CUdeviceptr address = 0;
    std::size_t count = 0;  // elements
    std::size_t element_size = 1;
};

// Which driver copy a transfer takes. The typed ones (cuMemcpyHtoD, DtoH,
// DtoD) name device memory; memory of a pool at a host location (the host, a
// host NUMA node) is not, and the driver refuses the typed host copies of it
// (INVALID_VALUE) while the unified cuMemcpy, which infers each side from its
// address, takes it. An owner that knows its memory is such (a
// StreamOrderedBuffer of a host pool) asks for Unified; a view does not know,
// so a typed copy the driver refuses is tried once more unified when the
// memory belongs to a pool (asked only then: no cost on success).
enum class CopyRoute : unsigned char { Typed, Unified };

// The checked transfers behind DeviceSpan and DeviceBuffer. `operation` names
// the caller in errors ("DeviceSpan::copy_from"); offsets and counts are in
// elements; a null stream means synchronous (done when it returns). The
// destination (or source) is elements [offset, offset + count) of the extent.
Result<void> copy_host_to_device(const char* operation, DeviceExtent destination, std::size_t offset,
                                 const void* source, std::size_t count, const StreamRef* stream,
                                 CopyRoute route = CopyRoute::Typed);
Result<void> copy_device_to_host(const char* operation, void* destination, std::size_t count, DeviceExtent source,
                                 std::size_t offset, const StreamRef* stream, CopyRoute route = CopyRoute::Typed);
// All of `source` to the start of `destination`: it must fit and not overlap.
Result<void> copy_device_to_device(const char* operation, DeviceExtent destination, DeviceExtent source,
                                   const StreamRef* stream, CopyRoute route = CopyRoute::Typed);
// Every byte set to `value` (cuMemsetD8).
Result<void> set_device_bytes(const char* operation, DeviceExtent destination, std::uint8_t value,
                              const StreamRef* stream);
// Every `size`-byte (2 or 4) element set to `value` (cuMemsetD16 /
// cuMemsetD32); the extent's bytes must be
// a whole number of 4-byte-aligned words.
Result<void> set_device_words(const char* operation, DeviceExtent destination, std::uint32_t value, std::size_t size,
                              const StreamRef* stream);
// InvalidArgument unless `bytes` at `address` are whole, aligned elements.
Result<void> check_device_view(CUdeviceptr address, std::size_t bytes, std::size_t element_size,
                               std::size_t alignment);
Result<void> check_subspan(std::size_t first, std::size_t count, std::size_t size);

// Every element of `destination` set to `value`: cuMemsetD8 for 1-byte
// elements, cuMemsetD16 / cuMemsetD32 (with the value's bits) for 2- and
// 4-byte ones.
template <typename T>
Result<void> fill_device(const char* operation, DeviceExtent destination, const T& value, const StreamRef* stream) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4, "the driver fills 1-, 2- and 4-byte elements");
    if constexpr (sizeof(T) == 1) {
        std::uint8_t byte = 0;
        std::memcpy(&byte, &value, 1);
        return set_device_bytes(operation, destination, byte, stream);
    } else if constexpr (sizeof(T) == 2) {
        std::uint16_t half = 0;
        std::memcpy(&half, &value, 2);
        return set_device_words(operation, destination, half, 2, stream);
    } else {
        std::uint32_t word = 0;
        std::memcpy(&word, &value, 4);
        return set_device_words(operation, destination, word, 4, stream);
    }
}

}  // namespace detail

template <typename T>
class DeviceSpan {
    static_assert(std::is_trivially_copyable_v<T>, "device spans hold trivially copyable elements (copied as bytes)");
    static_assert(!std::is_volatile_v<T>, "device span elements are not volatile");
    using Mutable = std::remove_const_t<T>;
    // Writes (copies into the span, sets, fills) need writable elements.
    template <typename U>
    using IfWritable = std::enable_if_t<!std::is_const_v<U>, int>;
    template <typename U>
    using IfFillable = std::enable_if_t<!std::is_const_v<U> && (sizeof(U) == 1 || sizeof(U) == 2 || sizeof(U) == 4), int>;

public:
    using element_type = T;
    using value_type = Mutable;

    constexpr DeviceSpan() noexcept = default;  // empty
    // `count` elements at `address`, taken as given (like a pointer and a
    // length); an address of 0 or a count of 0 is the empty span.
    constexpr DeviceSpan(CUdeviceptr address, std::size_t count) noexcept
        : address_(count == 0 ? 0 : address), count_(address == 0 ? 0 : count) {}
    // A span of T is also a read-only span of const T (as std::span converts).
    template <typename U, typename = std::enable_if_t<std::is_const_v<T> && std::is_same_v<U, Mutable>>>
    constexpr DeviceSpan(const DeviceSpan<U>& writable) noexcept
        : address_(writable.device_address()), count_(writable.size()) {}
    // Raw bytes seen as elements: InvalidArgument unless `bytes` is a whole
    // number of T and `address` is aligned for T. No bytes is the empty span.
    static Result<DeviceSpan> from_bytes(CUdeviceptr address, std::size_t bytes) {
        CUDYN_TRY(detail::check_device_view(address, bytes, sizeof(T), alignof(T)));
        return DeviceSpan(address, bytes / sizeof(T));
    }

    // Where the device sees the first element (0 when empty), for kernels and
    // raw driver calls.
    constexpr CUdeviceptr device_address() const noexcept { return address_; }
    constexpr std::size_t size() const noexcept { return count_; }
    constexpr std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
    constexpr bool empty() const noexcept { return count_ == 0; }
    // Elements [first, first + count), which may be empty; InvalidArgument
    // when they run past the end. Checked (a Result), unlike std::span's
    // precondition: a view past the end would let a copy write into memory
    // of another allocation.
    Result<DeviceSpan> subspan(std::size_t first, std::size_t count) const {
        CUDYN_TRY(detail::check_subspan(first, count, count_));
        return DeviceSpan(address_ + first * sizeof(T), count);
    }

    // Host -> device: the whole of `source` to the first source.size() elements.
    template <typename U = T, IfWritable<U> = 0>
    Result<void> copy_from(HostSpan<const Mutable> source) const {
        return detail::copy_host_to_device("DeviceSpan::copy_from", extent(), 0, source.data(), source.size(),
                                           nullptr);
    }
    template <typename U = T, IfWritable<U> = 0>
    Result<void> copy_from(HostSpan<const Mutable> source, StreamRef stream) const {
        return detail::copy_host_to_device("DeviceSpan::copy_from", extent(), 0, source.data(), source.size(),
                                           &stream);
    }
    // Device -> host: the first destination.size() elements into the span.
    Result<void> copy_to(HostSpan<Mutable> destination) const {
        return detail::copy_device_to_host("DeviceSpan::copy_to", destination.data(), destination.size(), extent(),
                                           0, nullptr);
    }
    Result<void> copy_to(HostSpan<Mutable> destination, StreamRef stream) const {
        return detail::copy_device_to_host("DeviceSpan::copy_to", destination.data(), destination.size(), extent(),
                                           0, &stream);
    }
    // Device -> device: all of `source` to the start of this span (it must fit
    // and the two must not overlap).
    template <typename U = T, IfWritable<U> = 0>
    Result<void> copy_from(DeviceSpan<const Mutable> source) const {
        return detail::copy_device_to_device("DeviceSpan::copy_from", extent(), source.extent(), nullptr);
    }
    template <typename U = T, IfWritable<U> = 0>
    Result<void> copy_from(DeviceSpan<const Mutable> source, StreamRef stream) const {
        return detail::copy_device_to_device("DeviceSpan::copy_from", extent(), source.extent(), &stream);
    }

    // Every byte set to `value` (cuMemsetD8).
    template <typename U = T, IfWritable<U> = 0>
    Result<void> set_bytes(std::uint8_t value) const {
        return detail::set_device_bytes("DeviceSpan::set_bytes", extent(), value, nullptr);
    }
    template <typename U = T, IfWritable<U> = 0>
    Result<void> set_bytes(std::uint8_t value, StreamRef stream) const {
        return detail::set_device_bytes("DeviceSpan::set_bytes", extent(), value, &stream);
    }
    // Every element set to `value`, for 1-, 2- and 4-byte elements
    // (cuMemsetD8 / D16 / D32).
    template <typename U = T, IfFillable<U> = 0>
    Result<void> fill(const Mutable& value) const {
        return detail::fill_device("DeviceSpan::fill", extent(), value, nullptr);
    }
    template <typename U = T, IfFillable<U> = 0>
    Result<void> fill(const Mutable& value, StreamRef stream) const {
        return detail::fill_device("DeviceSpan::fill", extent(), value, &stream);
    }

private:
    template <typename>
    friend class DeviceSpan;
    detail::DeviceExtent extent() const noexcept { return {address_, count_, sizeof(T)}; }

    CUdeviceptr address_ = 0;
    std::size_t count_ = 0;
};

}  // namespace cudyn
