// cudyn — the check that a driver entry is there, before anything else is asked of the driver; private to src/.
#pragma once

#include "cudyn/driver_call.hpp"

namespace cudyn::detail {

// The loader's error when the driver is unusable, NotSupported naming the
// entry when this driver lacks it: checked before anything else, so a CUDA
// 10.1 driver hears about the missing entry, not about a device attribute.
template <typename Pfn>
Result<void> require_entry(Pfn DriverTable::*entry) {
    const DriverTable* table = usable_driver();
    if (table == nullptr) return driver_unusable_error();
    if (table->*entry == nullptr) return missing_entry_error(entry_info(entry));
    return ok();
}

}  // namespace cudyn::detail
