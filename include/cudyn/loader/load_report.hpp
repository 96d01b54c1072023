// cudyn — what the loader found: the state of the driver and of each entry point.
#pragma once

#include <cuda.h>

#include <string>
#include <vector>

namespace cudyn {

enum class LoadState {
    Loaded,      // opened, cuInit succeeded
    NotFound,    // no library at the path tried
    Stub,        // the toolkit's stub libcuda (answers CUDA_ERROR_STUB_LIBRARY)
    InitFailed,  // opened, but cuInit failed (see init_result)
    Refused,     // the configured path was refused (not absolute); nothing was opened
};

// How one entry point was resolved: each independently of every other, so an
// old driver that lacks one entry still serves the rest.
enum class ResolvedVia {
    None,           // not resolved: the driver lacks it
    ProcAddressV2,  // cuGetProcAddress_v2 (driver 12.0+)
    ProcAddress,    // cuGetProcAddress (driver 11.3+)
    Dlsym,          // dlsym / GetProcAddress of the ABI symbol name
};

const char* to_string(LoadState state) noexcept;    // "loaded", "not_found", ...
const char* to_string(ResolvedVia via) noexcept;    // "proc_address_v2", ..., "none"

struct EntryPointReport {
    const char* name;        // base name ("cuMemAlloc")
    int version;             // ABI version asked (3020)
    const char* abi_symbol;  // "cuMemAlloc_v2"
    bool required;
    ResolvedVia via;         // None when unresolved
    bool resolved() const noexcept { return via != ResolvedVia::None; }
};

struct LoadReport {
    LoadState state = LoadState::NotFound;
    std::string requested_path;  // what the loader tried to open ("libcuda.so.1" or the override)
    std::string library_path;    // the real path of what was opened, empty if nothing was
    std::string message;         // why, in words, when state != Loaded
    int driver_version = 0;      // cuDriverGetVersion, 0 if unknown (e.g. 13000)
    CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;  // what cuInit(0) returned
    bool has_proc_address_v2 = false;
    bool has_proc_address = false;
    double load_milliseconds = 0;  // wall time of the whole first-use load
    std::vector<EntryPointReport> entry_points;  // in driver_symbols.def order

    std::size_t resolved_count() const noexcept;
    // Required entries the driver lacks: a driver older than cudyn supports.
    std::vector<const EntryPointReport*> missing_required() const;
    const EntryPointReport* find(const char* abi_symbol) const noexcept;
};

}  // namespace cudyn
