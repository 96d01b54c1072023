// cudyn — HostRegistration: page-locks memory the caller already owns
// (cuMemHostRegister_v2) for as long as the registration lives, and
// unregisters it (cuMemHostUnregister) on destruction. The caller's memory
// must outlive the registration.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/detail/size_checks.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/memory/host_span.hpp"
#include "cudyn/memory/owned_memory.hpp"

#include <cuda.h>

#include <cstddef>
#include <type_traits>

namespace cudyn {

// cuMemHostRegister flags, all off by default.
struct HostRegisterFlags {
    bool portable = false;       // registered for every context
    bool device_mapped = false;  // mapped into the device address space: device_address() is set
    bool io_memory = false;      // the range is I/O memory (e.g. a mapped PCIe BAR)
    bool read_only = false;      // the device only reads it (needs READ_ONLY_HOST_REGISTER_SUPPORTED)

    unsigned int to_cu() const noexcept {
        return (portable ? unsigned{CU_MEMHOSTREGISTER_PORTABLE} : 0u) |
               (device_mapped ? unsigned{CU_MEMHOSTREGISTER_DEVICEMAP} : 0u) |
               (io_memory ? unsigned{CU_MEMHOSTREGISTER_IOMEMORY} : 0u) |
               (read_only ? unsigned{CU_MEMHOSTREGISTER_READ_ONLY} : 0u);
    }
};

class HostRegistration {
public:
    // Registers [data, data + bytes). With flags.device_mapped the current
    // context's device must have CAN_MAP_HOST_MEMORY (NotSupported otherwise,
    // checked before registering).
    // InvalidArgument for a null pointer, zero bytes, or a range that runs
    // past the end of the address space.
    static Result<HostRegistration> register_memory(void* data, std::size_t bytes, HostRegisterFlags flags = {});
    // The elements of a container (std::vector, std::array, an array, ...),
    // deducing T.
    template <typename Container, typename T = std::remove_pointer_t<decltype(std::data(std::declval<Container&>()))>,
              typename = std::enable_if_t<!std::is_same_v<std::remove_cv_t<Container>, HostSpan<T>>>>
    static Result<HostRegistration> register_span(Container& container, HostRegisterFlags flags = {}) {
        return register_span(HostSpan<T>(container), flags);
    }
    // The span's bytes; InvalidArgument when its element count times the
    // element size overflows size_t (a hand-made span can claim that much).
    template <typename T>
    static Result<HostRegistration> register_span(HostSpan<T> span, HostRegisterFlags flags = {}) {
        static_assert(!std::is_const_v<T>, "register a span of writable elements");
        CUDYN_TRY_ASSIGN(const std::size_t bytes,
                         detail::byte_size(span.size(), sizeof(T), "HostRegistration::register_span: span of"));
        return register_memory(static_cast<void*>(span.data()), bytes, flags);
    }

    HostRegistration() noexcept = default;  // empty

    void* host_address() const noexcept { return reinterpret_cast<void*>(memory_.address()); }
    // Where kernels reach the memory when registered device_mapped, else 0.
    // It differs from host_address() unless the device reports
    // CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: pass this one to the device.
    CUdeviceptr device_address() const noexcept { return memory_.device_address(); }
    // The registered bytes as elements at device_address(), checked
    // (DeviceSpan::from_bytes); empty unless registered device_mapped.
    template <typename T>
    Result<DeviceSpan<T>> device_span_as() const {
        return DeviceSpan<T>::from_bytes(device_address(), device_address() == 0 ? 0 : size_bytes());
    }
    // The same bytes, unchecked: every byte view is valid.
    DeviceSpan<std::byte> device_span() const noexcept {
        return DeviceSpan<std::byte>(device_address(), device_address() == 0 ? 0 : size_bytes());
    }
    std::size_t size_bytes() const noexcept { return memory_.bytes(); }
    bool empty() const noexcept { return memory_.empty(); }
    HostRegisterFlags flags() const noexcept { return flags_; }

    // Unregisters now and reports the driver's answer: empty afterwards, or,
    // when the driver refused, still registered (unregister() may be retried).
    // The destructor does the same, silently.
    Result<void> unregister() { return memory_.release(); }

private:
    HostRegistration(detail::OwnedMemory memory, HostRegisterFlags flags) noexcept
        : memory_(std::move(memory)), flags_(flags) {}
    detail::OwnedMemory memory_;
    HostRegisterFlags flags_{};
};

}  // namespace cudyn
