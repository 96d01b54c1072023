// cudyn — the device facts cache: the driver queries behind device_facts.hpp.
#include "device_facts.hpp"
#include "cudyn/driver_call.hpp"

namespace cudyn::detail::facts {

std::atomic<int> device_count{0};
std::atomic<int> concurrent_managed_access[kCachedDevices] = {};

Result<int> ask_device_count() {
    int count = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetCount_v2000, &count));
    device_count.store(count + 1, std::memory_order_release);
    return count;
}

Result<bool> ask_concurrent_managed_access(int ordinal) {
    CUdevice device = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGet_v2000, &device, ordinal));
    int value = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetAttribute_v2000, &value,
                          CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, device));
    if (ordinal >= 0 && static_cast<std::size_t>(ordinal) < kCachedDevices)
        concurrent_managed_access[ordinal].store(value != 0 ? kYes : kNo, std::memory_order_release);
    return value != 0;
}

}  // namespace cudyn::detail::facts
