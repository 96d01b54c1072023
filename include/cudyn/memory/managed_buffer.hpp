// cudyn — ManagedBuffer<T>: managed memory from cuMemAllocManaged, reachable
// from the host (data(), span()) and from every device (device_address()) at
// the same address, migrated on demand or by ManagedRange.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/memory/managed_range.hpp"
#include "cudyn/memory/owned_memory.hpp"

#include <cuda.h>

#include <cstddef>

namespace cudyn {

// cuMemAllocManaged attach flags.
enum class ManagedAttach {
    Global,  // CU_MEM_ATTACH_GLOBAL: any stream on any device may use it
    Host,    // CU_MEM_ATTACH_HOST: host only until attached to a stream
};

namespace detail {
Result<OwnedMemory> allocate_managed_memory(std::size_t count, std::size_t element_size, ManagedAttach attach);
// Hints over elements [first, first + count) of a managed allocation.
Result<ManagedRange> managed_subrange(const OwnedMemory& memory, std::size_t element_size, std::size_t first,
                                         std::size_t count);
}  // namespace detail

template <typename T>
class ManagedBuffer : public detail::HostTypedMemory<T> {
public:
    // `count` elements of managed memory (needs a current context whose
    // device reports CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY).
    static Result<ManagedBuffer> allocate(std::size_t count, ManagedAttach attach = ManagedAttach::Global) {
        return detail::adopt<ManagedBuffer>(
            detail::allocate_managed_memory(count, sizeof(T), attach),
            [attach](detail::OwnedMemory memory) { return ManagedBuffer(std::move(memory), attach); });
    }

    ManagedBuffer() noexcept = default;  // empty

    // The same address as data(), as the driver's type (0 when empty).
    CUdeviceptr device_address() const noexcept { return this->memory_.device_address(); }
    // The buffer as a DeviceSpan, for device-side copies and fills.
    DeviceSpan<T> device_span() const noexcept { return DeviceSpan<T>(device_address(), this->size()); }
    ManagedAttach attach() const noexcept { return attach_; }

    // Advice and prefetch over the whole buffer, or elements [first, first + count).
    Result<ManagedRange> managed_range() const {
        return detail::managed_subrange(this->memory_, sizeof(T), 0, this->size());
    }
    Result<ManagedRange> managed_range(std::size_t first, std::size_t count) const {
        return detail::managed_subrange(this->memory_, sizeof(T), first, count);
    }

private:
    ManagedBuffer(detail::OwnedMemory memory, ManagedAttach attach) noexcept
        : detail::HostTypedMemory<T>(std::move(memory)), attach_(attach) {}
    ManagedAttach attach_ = ManagedAttach::Global;
};

}  // namespace cudyn
