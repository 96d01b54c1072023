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

#include "cudyn/core/result.hpp"
#include "cudyn/detail/code_layout.hpp"
#include "cudyn/loader/driver_table.hpp"

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

// call_driver's failures, built out of line (cold): what the compiler inlines
// at every call site is then only the table load, the null check, the call
// and the result test, with no Error (strings) to construct or move.
template <typename Pfn>
CUDYN_DETAIL_COLD Result<void> entry_unavailable(const DriverTable* table, Pfn DriverTable::*entry) {
    if (table == nullptr) return driver_unusable_error();
    return missing_entry_error(entry_info(entry));
}
template <typename Pfn>
CUDYN_DETAIL_COLD Result<void> call_failed(CUresult result, Pfn DriverTable::*entry) {
    return failed_call_error(result, entry_info(entry));
}
}  // namespace detail

// True when the loaded driver has this entry (false when the driver is unusable).
template <typename Pfn>
bool has_entry(Pfn DriverTable::*entry) noexcept {
    const DriverTable* table = detail::usable_driver();
    return table != nullptr && table->*entry != nullptr;
}

namespace detail {
// call_driver's refusal without the call: the loader's error when the driver
// is unusable, NotSupported naming the entry when this driver lacks it.
// Operations ask it first, so that on a driver without the entry the error
// names the entry, not whatever later check would fail; has_entry() only
// chooses between paths.
template <typename Pfn>
Result<void> require_entry(Pfn DriverTable::*entry) {
    const DriverTable* table = usable_driver();
    if (table == nullptr || table->*entry == nullptr) return entry_unavailable(table, entry);
    return ok();
}
}  // namespace detail

template <typename Pfn, typename... Args>
Result<void> call_driver(Pfn DriverTable::*entry, Args... args) {
    const DriverTable* table = detail::usable_driver();
    const Pfn function = table != nullptr ? table->*entry : nullptr;
    if (function == nullptr) return detail::entry_unavailable(table, entry);
    const CUresult result = function(args...);
    if (result != CUDA_SUCCESS) return detail::call_failed(result, entry);
    return ok();
}

}  // namespace cudyn
