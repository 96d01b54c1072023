// cudyn — DeviceBuffer: cuMemAlloc_v2 / cuMemFree_v2 (its copies and sets are
// DeviceSpan's, in device_span.cpp).
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/detail/size_checks.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "memory/internal.hpp"

#include <utility>

namespace cudyn::detail {

Result<void> free_device_memory(std::uintptr_t address) {
    return call_driver(&DriverTable::cuMemFree_v3020, static_cast<CUdeviceptr>(address));
}

Result<OwnedMemory> allocate_device_memory(std::size_t count, std::size_t element_size) {
    CUDYN_TRY_ASSIGN(auto bytes, checked_bytes(count, element_size, "DeviceBuffer::allocate: count"));
    CUDYN_TRY_ASSIGN(auto context, OwnerContext::current());
    CUdeviceptr pointer = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemAlloc_v3020, &pointer, bytes));
    return OwnedMemory(static_cast<std::uintptr_t>(pointer), pointer, bytes, free_device_memory, std::move(context),
                       MemoryKind::Device);
}

}  // namespace cudyn::detail
