// cudyn — facts about the visible devices that cannot change while the
// driver stays loaded, read from the driver once and then from memory.
//
// CUDA fixes the set of visible devices and their attributes at cuInit
// (CUDA_VISIBLE_DEVICES is read then), and cudyn never unloads the driver, so
// the answers stay true for the life of the process. The per-call checks use
// them: without the cache each advice paid four driver calls of checks (two
// device counts, cuDeviceGet, cuDeviceGetAttribute) next to one
// cuMemAdvise_v2, and each PhysicalMemory::create or allocation_granularity
// read every capability attribute again.
//
// Each fact is 0 until the first successful query stores it (racing first
// queries both ask the driver and store the same answer); a failed query is
// not stored, so the next call asks again. Reading a stored fact is one
// acquire load, inline.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/device_capabilities.hpp"

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace cudyn::detail {

namespace facts {
// The device count plus one.
extern std::atomic<int> device_count;

// One word per device ordinal: 0 unknown, else kKnown with bit i set when row
// i of device_capability_list is "yes", so a device's whole DeviceCapabilities
// is published by one store. Ordinals past the table are asked every time.
constexpr std::size_t kCachedDevices = 64;
constexpr std::uint32_t kKnown = std::uint32_t{1} << 31;
static_assert(device_capability_count < 31, "device_capabilities.def outgrew the cache word: widen it");
extern std::atomic<std::uint32_t> capability_words[kCachedDevices];

// The bit of each capability in a cache word, in the .def's order.
enum class Bit : unsigned {
#define CUDYN_DEVICE_CAPABILITY(field, attribute, description) field,
#include "cudyn/device/device_capabilities.def"
#undef CUDYN_DEVICE_CAPABILITY
};

// The stored word of `ordinal`, 0 when unknown or past the table.
inline std::uint32_t stored_capabilities(int ordinal) noexcept {
    if (ordinal < 0 || static_cast<std::size_t>(ordinal) >= kCachedDevices) return 0;
    return capability_words[ordinal].load(std::memory_order_acquire);
}
DeviceCapabilities unpack(std::uint32_t word) noexcept;

Result<int> ask_device_count();  // and store it
// Reads every attribute of device `ordinal` (its handle `device`, or looked
// up with cuDeviceGet when `device` is null) and stores the answer where the
// ordinal has a slot.
Result<DeviceCapabilities> ask_capabilities(int ordinal, const CUdevice* device);
}  // namespace facts

// cuDeviceGetCount, once.
inline Result<int> visible_device_count() {
    const int known = facts::device_count.load(std::memory_order_acquire);
    if (known != 0) return known - 1;
    return facts::ask_device_count();
}

// The capabilities of device `ordinal` (handle `device`), once per device.
inline Result<DeviceCapabilities> capabilities(int ordinal, CUdevice device) {
    if (const std::uint32_t known = facts::stored_capabilities(ordinal); known != 0) return facts::unpack(known);
    return facts::ask_capabilities(ordinal, &device);
}

// The same by ordinal alone: InvalidArgument, as Device::get words it but
// naming `operation`, outside [0, visible_device_count()), without asking
// the driver once both are known.
Result<DeviceCapabilities> capabilities(int ordinal, const char* operation);

// CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS of device `ordinal`, once
// per device; `ordinal` must be in [0, visible_device_count()).
inline Result<bool> concurrent_managed_access(int ordinal) {
    if (const std::uint32_t known = facts::stored_capabilities(ordinal); known != 0)
        return (known & (std::uint32_t{1} << static_cast<unsigned>(facts::Bit::concurrent_managed_access))) != 0;
    CUDYN_TRY_ASSIGN(auto caps, facts::ask_capabilities(ordinal, nullptr));
    return caps.concurrent_managed_access;
}

// The cache's answers alone, for fast paths that fall back to the checking
// calls above when an answer is not (yet) known: true only when a stored fact
// says `ordinal` is a visible device, or a visible device with
// CONCURRENT_MANAGED_ACCESS. Never asks the driver.
inline bool known_visible_device(int ordinal) noexcept {
    return ordinal >= 0 && ordinal < facts::device_count.load(std::memory_order_acquire) - 1;
}
inline bool known_concurrent_managed_device(int ordinal) noexcept {
    return known_visible_device(ordinal) &&
           (facts::stored_capabilities(ordinal) &
            (std::uint32_t{1} << static_cast<unsigned>(facts::Bit::concurrent_managed_access))) != 0;
}

// Forgets every stored capability word, so the next query reads the driver
// again. Only for the fake-driver tests, whose driver can change an attribute
// mid-process (a real one never does); the library never calls it.
void forget_capabilities() noexcept;

}  // namespace cudyn::detail
