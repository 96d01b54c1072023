// cudyn — calling one table entry with the library's error handling.
//
//     CUdeviceptr p;
//     CUDYN_TRY(cudyn::call_driver(&cudyn::DriverTable::cuMemAlloc_v3020, &p, bytes));
//
// Gives the loader's typed error when the driver is unusable (DriverNotFound,
// StubDriver, ...), NotSupported naming the entry when this driver lacks it,
// and the mapped CUresult when the call fails. The success path is a load of
// the already-built table, a null check and the call.
#pragma once

#include "cudyn/driver_table.hpp"
#include "cudyn/result.hpp"

namespace cudyn {

namespace detail {
// Published after a load that succeeded; stays null when the driver is unusable.
extern std::atomic<const DriverTable*> usable_table;
const DriverTable* usable_driver_slow() noexcept;

// The table when the driver is loaded and initialised, else null. Loads on
// first use; afterwards one acquire load.
inline const DriverTable* usable_driver() noexcept {
    if (const DriverTable* table = usable_table.load(std::memory_order_acquire)) return table;
    return usable_driver_slow();
}

// Error paths, kept out of line so the success path stays small.
// The error for an unusable driver (same as driver_status()'s).
Error driver_unusable_error();
Error missing_entry_error(const DriverEntryInfo& entry);
Error failed_call_error(CUresult result, const DriverEntryInfo& entry);
}  // namespace detail

// True when the loaded driver has this entry (false when the driver is unusable).
template <typename Pfn>
bool has_entry(Pfn DriverTable::*entry) noexcept {
    const DriverTable* table = detail::usable_driver();
    return table != nullptr && table->*entry != nullptr;
}

template <typename Pfn, typename... Args>
Result<void> call_driver(Pfn DriverTable::*entry, Args... args) {
    const DriverTable* table = detail::usable_driver();
    if (table == nullptr) return detail::driver_unusable_error();
    const Pfn function = table->*entry;
    if (function == nullptr) return detail::missing_entry_error(entry_info(entry));
    const CUresult result = function(args...);
    if (result != CUDA_SUCCESS) return detail::failed_call_error(result, entry_info(entry));
    return ok();
}

}  // namespace cudyn
