// cudyn — the runtime function table: one pointer per driver entry point.
//
// Programs may call any entry through it (a kernel launch, a module load), so
// their whole binary stays free of a libcuda link, not only their memory code:
//
//     const cudyn::DriverTable& cu = cudyn::driver();
//     if (cu.cuLaunchKernel_v4000) cu.cuLaunchKernel_v4000(...);
//
// Members are named <base>_v<ABI version> (cuMemAlloc_v3020, cuMemAdvise_v8000,
// cuMemAdvise_v12020), never by the cuda.h spelling, which the preprocessor
// rewrites (cuMemAlloc -> cuMemAlloc_v2, and to _ptsz forms under per-thread
// default stream builds). A member is null when the driver lacks that entry.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <cstddef>

namespace cudyn {

// Two old ABIs the table keeps for CUDA 10 drivers, whose typedefs
// cudaTypedefs.h only declares for NVIDIA's internal builds. Declared in
// cudyn's namespace so they cannot clash with the global ones.
using PFN_cuDevicePrimaryCtxRelease_v7000 = CUresult(CUDAAPI*)(CUdevice_v1 dev);
using PFN_cuIpcOpenMemHandle_v4010 = CUresult(CUDAAPI*)(CUdeviceptr_v2* pdptr, CUipcMemHandle_v1 handle,
                                                        unsigned int flags);

struct DriverTable {
#define CUDYN_DRIVER_ENTRY(base, version, abi, need, decl) PFN_##base##_v##version base##_v##version = nullptr;
#include "cudyn/loader/driver_symbols.def"
#undef CUDYN_DRIVER_ENTRY
};

// Static facts about one entry of the table, generated from driver_symbols.def.
struct DriverEntryInfo {
    const char* name;        // base name asked of cuGetProcAddress ("cuMemAlloc")
    int version;             // ABI version pinned from cudaTypedefs.h (3020)
    const char* abi_symbol;  // exported symbol for that ABI ("cuMemAlloc_v2")
    bool required;           // present in every supported driver (CUDA 10.1+)
    std::size_t offset;      // byte offset of the member in DriverTable
};

inline constexpr DriverEntryInfo driver_entries[] = {
#define CUDYN_DRIVER_REQUIRED true
#define CUDYN_DRIVER_OPTIONAL false
#define CUDYN_DRIVER_ENTRY(base, version, abi, need, decl) \
    {#base, version, #abi, CUDYN_DRIVER_##need, offsetof(DriverTable, base##_v##version)},
#include "cudyn/loader/driver_symbols.def"
#undef CUDYN_DRIVER_ENTRY
#undef CUDYN_DRIVER_REQUIRED
#undef CUDYN_DRIVER_OPTIONAL
};
inline constexpr std::size_t driver_entry_count = sizeof(driver_entries) / sizeof(driver_entries[0]);

namespace detail {
// Published once the first-use load has finished (release store), so the hot
// path is one acquire load of an already-built table: a plain load on x86.
extern std::atomic<const DriverTable*> loaded_table;  // set after any load attempt
const DriverTable& load_table_slow();
}  // namespace detail

// The table, loading the driver on first use (thread-safe, once per process).
// When the driver could not be loaded every pointer is null; load_report() and
// driver_status() (loader.hpp) say why.
inline const DriverTable& driver() {
    if (const DriverTable* table = detail::loaded_table.load(std::memory_order_acquire)) return *table;
    return detail::load_table_slow();
}

// The static facts of the entry a table member belongs to, e.g.
// entry_info(&DriverTable::cuMemAlloc_v3020).abi_symbol == "cuMemAlloc_v2".
template <typename Pfn>
const DriverEntryInfo& entry_info(Pfn DriverTable::*member) {
    static const DriverTable probe{};
    const auto offset = static_cast<std::size_t>(reinterpret_cast<const char*>(&(probe.*member)) -
                                                 reinterpret_cast<const char*>(&probe));
    for (const DriverEntryInfo& info : driver_entries)
        if (info.offset == offset) return info;
    return driver_entries[0];  // unreachable: every member comes from the list
}

}  // namespace cudyn
