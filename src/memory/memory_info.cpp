// cudyn — memory information: cuMemGetInfo_v2 and cuPointerGetAttributes.
#include "cudyn/memory/memory_info.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "core/internal.hpp"
#include "memory/internal.hpp"

#include <cstdint>
#include <utility>

namespace cudyn {

Result<DeviceMemoryInfo> current_device_memory_info() {
    CUDYN_TRY_ASSIGN(auto device, detail::current_context_device());
    DeviceMemoryInfo info;
    info.device = static_cast<int>(device);
    CUDYN_TRY(call_driver(&DriverTable::cuMemGetInfo_v3020, &info.free_bytes, &info.total_bytes));
    return info;
}

Result<DeviceMemoryInfo> device_memory_info(const PrimaryContext& context) {
    constexpr detail::Operation kInfo{"device_memory_info"};
    if (context.handle() == nullptr) return kInfo.invalid("context is empty (moved from or released)");
    DeviceMemoryInfo info;
    info.device = context.device().ordinal();
    auto queried = detail::in_context(context.handle(), [&] {
        return call_driver(&DriverTable::cuMemGetInfo_v3020, &info.free_bytes, &info.total_bytes);
    });
    if (!queried) return kInfo.context(std::move(queried).error());
    return info;
}

const char* to_string(MemoryType type) noexcept {
    switch (type) {
        case MemoryType::Unknown: return "unknown";
        case MemoryType::Host: return "host";
        case MemoryType::Device: return "device";
        case MemoryType::Array: return "array";
        case MemoryType::Unified: return "unified";
    }
    return "unknown";
}

Result<PointerAttributes> pointer_attributes(CUdeviceptr address) {
    unsigned int memory_type = 0;
    int device_ordinal = -1;
    // Documented as a boolean; held in 4 zeroed bytes so that a driver writing
    // either 1 or 4 bytes stays inside the object (little-endian low byte).
    unsigned int is_managed = 0;
    CUdeviceptr range_base = 0;
    std::size_t range_size = 0;
    CUdeviceptr device_pointer = 0;
    void* host_pointer = nullptr;
    CUcontext context = nullptr;
    CUpointer_attribute names[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_IS_MANAGED,       CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE,       CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
        CU_POINTER_ATTRIBUTE_HOST_POINTER,     CU_POINTER_ATTRIBUTE_CONTEXT,
    };
    void* values[] = {&memory_type, &device_ordinal, &is_managed, &range_base,
                      &range_size,  &device_pointer, &host_pointer, &context};
    static_assert(sizeof names / sizeof names[0] == sizeof values / sizeof values[0], "one value per attribute");
    constexpr unsigned int kCount = static_cast<unsigned int>(sizeof names / sizeof names[0]);
    CUDYN_TRY(call_driver(&DriverTable::cuPointerGetAttributes_v7000, kCount, names, values, address));
    PointerAttributes attributes;
    switch (memory_type) {
        case CU_MEMORYTYPE_HOST: attributes.memory_type = MemoryType::Host; break;
        case CU_MEMORYTYPE_DEVICE: attributes.memory_type = MemoryType::Device; break;
        case CU_MEMORYTYPE_ARRAY: attributes.memory_type = MemoryType::Array; break;
        case CU_MEMORYTYPE_UNIFIED: attributes.memory_type = MemoryType::Unified; break;
        default: return attributes;  // not tracked: the driver wrote zeros
    }
    attributes.device_ordinal = device_ordinal;
    attributes.is_managed = is_managed != 0;
    attributes.range_base = range_base;
    attributes.range_size_bytes = range_size;
    attributes.device_address = device_pointer;
    attributes.host_address = host_pointer;
    attributes.context = context;
    return attributes;
}

Result<PointerAttributes> pointer_attributes(const void* address) {
    return pointer_attributes(static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(address)));
}

}  // namespace cudyn
