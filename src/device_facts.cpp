// cudyn — the device facts cache (see device_facts.hpp).
#include "device_facts.hpp"
#include "cudyn/driver_call.hpp"

#include <atomic>
#include <cstddef>

namespace cudyn::detail {

namespace {

// Each fact is 0 until the first successful query stores the answer (racing
// first queries both ask the driver and store the same answer).
std::atomic<int> device_count_plus_one{0};

// One slot per device ordinal: 0 unknown, 1 no, 2 yes. Ordinals past the
// table (no machine has that many GPUs today) are asked every time.
constexpr std::size_t kCachedDevices = 64;
constexpr int kNo = 1;
constexpr int kYes = 2;
std::atomic<int> concurrent_access[kCachedDevices] = {};

Result<bool> ask_concurrent_managed_access(int ordinal) {
    CUdevice device = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGet_v2000, &device, ordinal));
    int value = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetAttribute_v2000, &value,
                          CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, device));
    return value != 0;
}

}  // namespace

Result<int> visible_device_count() {
    const int known = device_count_plus_one.load(std::memory_order_acquire);
    if (known != 0) return known - 1;
    int count = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetCount_v2000, &count));
    device_count_plus_one.store(count + 1, std::memory_order_release);
    return count;
}

Result<bool> concurrent_managed_access(int ordinal) {
    if (ordinal < 0 || static_cast<std::size_t>(ordinal) >= kCachedDevices) return ask_concurrent_managed_access(ordinal);
    std::atomic<int>& slot = concurrent_access[static_cast<std::size_t>(ordinal)];
    const int known = slot.load(std::memory_order_acquire);
    if (known != 0) return known == kYes;
    auto asked = ask_concurrent_managed_access(ordinal);
    if (asked) slot.store(*asked ? kYes : kNo, std::memory_order_release);
    return asked;
}

}  // namespace cudyn::detail
