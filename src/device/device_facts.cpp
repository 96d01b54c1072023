// cudyn — the device facts cache: the driver queries behind device_facts.hpp.
#include "device/device_facts.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/loader.hpp"
#include "device/internal.hpp"

#include <string>
#include <utility>

namespace cudyn::detail::facts {

std::atomic<int> device_count{0};
std::atomic<std::uint32_t> capability_words[kCachedDevices] = {};

Result<int> ask_device_count() {
    int count = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetCount_v2000, &count));
    device_count.store(count + 1, std::memory_order_release);
    return count;
}

DeviceCapabilities unpack(std::uint32_t word) noexcept {
    DeviceCapabilities caps;
    for (std::size_t i = 0; i < device_capability_count; ++i)
        caps.*device_capability_list[i].field = (word & (std::uint32_t{1} << i)) != 0;
    return caps;
}

Result<DeviceCapabilities> ask_capabilities(int ordinal, const CUdevice* device) {
    CUDYN_TRY(driver_status());
    CUdevice handle = device != nullptr ? *device : 0;
    if (device == nullptr) CUDYN_TRY(call_driver(&DriverTable::cuDeviceGet_v2000, &handle, ordinal));
    // An attribute newer than the driver is answered with CUDA_ERROR_INVALID_VALUE
    // (or NOT_SUPPORTED): that means "no", not a failure of the whole probe, and
    // it is stored like any answer since that driver will never learn it. Any
    // other answer (out of memory, a lost context, ...) fails the probe and
    // nothing is stored: a transient error must not read as a permanent absence.
    std::uint32_t word = kKnown;
    for (std::size_t i = 0; i < device_capability_count; ++i) {
        int value = 0;
        const auto read = call_driver(&DriverTable::cuDeviceGetAttribute_v2000, &value,
                                      device_capability_list[i].attribute, handle);
        if (read) {
            if (value != 0) word |= std::uint32_t{1} << i;
            continue;
        }
        const CUresult why = read.error().driver_result;
        if (why != CUDA_ERROR_INVALID_VALUE && why != CUDA_ERROR_NOT_SUPPORTED) return read.error();
    }
    if (ordinal >= 0 && static_cast<std::size_t>(ordinal) < kCachedDevices)
        capability_words[ordinal].store(word, std::memory_order_release);
    return unpack(word);
}

}  // namespace cudyn::detail::facts

namespace cudyn::detail {

Result<DeviceCapabilities> capabilities(int ordinal, const char* operation) {
    if (const std::uint32_t known = facts::stored_capabilities(ordinal); known != 0) return facts::unpack(known);
    CUDYN_TRY_ASSIGN(const int count, visible_device_count());
    if (ordinal < 0 || ordinal >= count) return ordinal_out_of_range(operation, ordinal, count);
    return facts::ask_capabilities(ordinal, nullptr);
}

void forget_capabilities() noexcept {
    for (auto& word : facts::capability_words) word.store(0, std::memory_order_release);
}

}  // namespace cudyn::detail
