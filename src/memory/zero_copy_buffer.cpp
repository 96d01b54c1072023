// cudyn — ZeroCopyBuffer: zero-copy host memory, and the host-mapping checks
// HostRegistration shares.
#include "cudyn/memory/zero_copy_buffer.hpp"
#include "cudyn/detail/size_checks.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "core/internal.hpp"
#include "memory/internal.hpp"

#include <string>

namespace cudyn::detail {

Result<CUdevice> current_context_device() {
    CUdevice device = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuCtxGetDevice_v2000, &device));
    return device;
}

Result<void> require_host_mapping(const char* entry, const char* what) {
    CUDYN_TRY_ASSIGN(auto device, current_context_device());
    int can_map = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetAttribute_v2000, &can_map, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY,
                          device));
    if (can_map != 0) return ok();
    const std::string why = " cannot map host memory (CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY is 0)";
    return Operation(what).not_supported(entry, "device " + std::to_string(device) + why);
}

Result<CUdeviceptr> mapped_device_pointer(void* host) {
    CUdeviceptr device_pointer = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemHostGetDevicePointer_v3020, &device_pointer, host, 0u));
    return device_pointer;
}

Result<OwnedMemory> allocate_zero_copy_memory(std::size_t count, std::size_t element_size, PinnedFlags flags) {
    const char* what = "ZeroCopyBuffer::allocate: count";
    CUDYN_TRY(checked_bytes(count, element_size, what));
    CUDYN_TRY(require_host_mapping("cuMemHostGetDevicePointer_v2", "ZeroCopyBuffer"));
    flags.device_mapped = true;
    CUDYN_TRY_ASSIGN(OwnedMemory memory, allocate_pinned_memory(count, element_size, flags.to_cu(), what,
                                                                         MemoryKind::Mapped));
    // On failure `memory` frees the allocation on the way out.
    CUDYN_TRY_ASSIGN(auto device_pointer, mapped_device_pointer(reinterpret_cast<void*>(memory.address())));
    memory.set_device_address(device_pointer);
    return memory;
}

}  // namespace cudyn::detail
