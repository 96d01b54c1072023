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
// The table when the driver is loaded and initialised, else null. Loads on
// first use.
const DriverTable* usable_driver() noexcept;
// The error for an unusable driver (same as driver_status()'s).
Error driver_unusable_error();
Error missing_entry_error(const DriverEntryInfo& entry);
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
    if (result != CUDA_SUCCESS) return Error::from_driver(result, entry_info(entry).abi_symbol);
    return ok();
}

}  // namespace cudyn
