// cudyn — facts about the visible devices that cannot change while the
// driver stays loaded, read from the driver once and then from memory.
//
// CUDA fixes the set of visible devices and their attributes at cuInit
// (CUDA_VISIBLE_DEVICES is read then), and cudyn never unloads the driver, so
// the answers stay true for the life of the process. The per-call checks of
// advice and prefetch use them: without the cache each advice paid four
// driver calls (two device counts, cuDeviceGet, cuDeviceGetAttribute) of
// checks, 14% on top of a 755 ns cuMemAdvise_v2 on an H200.
//
// Each fact is 0 until the first successful query stores it (racing first
// queries both ask the driver and store the same answer); a failed query is
// not stored, so the next call asks again. Reading a stored fact is one
// acquire load, inline.
#pragma once

#include "cudyn/result.hpp"

#include <atomic>
#include <cstddef>

namespace cudyn::detail {

namespace facts {
// The device count plus one.
extern std::atomic<int> device_count;
// One slot per device ordinal: 0 unknown, kNo, kYes. Ordinals past the table
// (no machine has that many GPUs today) are asked every time.
constexpr std::size_t kCachedDevices = 64;
constexpr int kNo = 1;
constexpr int kYes = 2;
extern std::atomic<int> concurrent_managed_access[kCachedDevices];

Result<int> ask_device_count();                        // and store it
Result<bool> ask_concurrent_managed_access(int ordinal);  // and store it where it has a slot
}  // namespace facts

// cuDeviceGetCount, once.
inline Result<int> visible_device_count() {
    const int known = facts::device_count.load(std::memory_order_acquire);
    if (known != 0) return known - 1;
    return facts::ask_device_count();
}

// CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS of device `ordinal`, once
// per device; `ordinal` must be in [0, visible_device_count()).
inline Result<bool> concurrent_managed_access(int ordinal) {
    if (ordinal >= 0 && static_cast<std::size_t>(ordinal) < facts::kCachedDevices) {
        const int known = facts::concurrent_managed_access[ordinal].load(std::memory_order_acquire);
        if (known != 0) return known == facts::kYes;
    }
    return facts::ask_concurrent_managed_access(ordinal);
}

}  // namespace cudyn::detail
