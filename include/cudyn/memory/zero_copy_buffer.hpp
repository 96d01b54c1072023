// cudyn — ZeroCopyBuffer<T>: zero-copy host memory. The host reads and writes
// it through data()/span(); kernels read and write the same bytes over the
// bus through device_address(), with no copy in between.
//
// cuMemHostAlloc(DEVICEMAP) + cuMemHostGetDevicePointer_v2 (flags 0). The
// device pointer is for the current context's device. NotSupported where that
// device lacks CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, checked before
// anything is allocated.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/memory/owned_memory.hpp"
#include "cudyn/memory/pinned_buffer.hpp"

#include <cuda.h>

#include <cstddef>

namespace cudyn {

namespace detail {
// The mapped allocation: host address, and the device address from
// cuMemHostGetDevicePointer_v2; nothing is left allocated on failure.
Result<OwnedMemory> allocate_zero_copy_memory(std::size_t count, std::size_t element_size, PinnedFlags flags);
}  // namespace detail

// Pinned memory (data(), span(), flags() as PinnedBuffer) that the device
// also reaches.
template <typename T>
class ZeroCopyBuffer : public PinnedBuffer<T> {
public:
    // `count` elements; `flags.device_mapped` is implied. write_combined makes
    // kernel reads faster and host reads very slow: opt-in only.
    static Result<ZeroCopyBuffer> allocate(std::size_t count, PinnedFlags flags = {}) {
        flags.device_mapped = true;
        return detail::adopt<ZeroCopyBuffer>(
            detail::allocate_zero_copy_memory(count, sizeof(T), flags),
            [flags](detail::OwnedMemory memory) { return ZeroCopyBuffer(std::move(memory), flags); });
    }

    ZeroCopyBuffer() noexcept = default;  // empty

    // Where kernels reach the buffer (0 when empty). It may differ from the
    // host address, so always pass this one to the device.
    CUdeviceptr device_address() const noexcept { return this->memory_.device_address(); }
    // The device's side as a DeviceSpan, for device-side copies and fills.
    DeviceSpan<T> device_span() const noexcept { return DeviceSpan<T>(device_address(), this->size()); }

private:
    using PinnedBuffer<T>::PinnedBuffer;
};

}  // namespace cudyn
