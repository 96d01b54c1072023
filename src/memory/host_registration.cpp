// cudyn — HostRegistration: cuMemHostRegister_v2 / cuMemHostUnregister.
#include "cudyn/memory/host_registration.hpp"
#include "cudyn/detail/size_checks.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "core/internal.hpp"
#include "memory/internal.hpp"

#include <cstdint>
#include <utility>

namespace cudyn {

namespace {

constexpr detail::Operation kRegister{"HostRegistration::register_memory"};

Result<void> unregister_host_memory(std::uintptr_t address) {
    return call_driver(&DriverTable::cuMemHostUnregister_v4000, reinterpret_cast<void*>(address));
}

}  // namespace

Result<HostRegistration> HostRegistration::register_memory(void* data, std::size_t bytes, HostRegisterFlags flags) {
    if (data == nullptr) return kRegister.invalid("data is a null pointer");
    if (bytes == 0) return kRegister.invalid("bytes must be non-zero");
    CUDYN_TRY(detail::check_address_range(reinterpret_cast<std::uintptr_t>(data), bytes, kRegister.name()));
    if (flags.device_mapped)
        CUDYN_TRY(detail::require_host_mapping("cuMemHostGetDevicePointer_v2", "HostRegistration (device_mapped)"));
    CUDYN_TRY_ASSIGN(auto context, detail::OwnerContext::current());
    CUDYN_TRY(call_driver(&DriverTable::cuMemHostRegister_v6050, data, bytes, flags.to_cu()));
    detail::OwnedMemory memory(reinterpret_cast<std::uintptr_t>(data), 0, bytes, unregister_host_memory,
                               std::move(context), MemoryKind::Registered);
    if (flags.device_mapped) {
        // On failure `memory` unregisters on the way out.
        CUDYN_TRY_ASSIGN(auto device_pointer, detail::mapped_device_pointer(data));
        memory.set_device_address(device_pointer);
    }
    return HostRegistration(std::move(memory), flags);
}

}  // namespace cudyn
