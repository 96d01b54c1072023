// cudyn — NCCL (libnccl.so.2), opened at first use the way the driver is:
// never linked, an absolute override path (CUDYN_NCCL_PATH), its own load
// report. NCCL is optional: where it is missing or lacks an entry, the calls
// that need it answer a typed absence naming what is missing, and the rest of
// cudyn works.
#pragma once

#include "cudyn/core/result.hpp"

#include <string>
#include <vector>

namespace cudyn {

enum class NcclState {
    Loaded,    // opened, ncclGetVersion answered
    NotFound,  // no library at any place tried (or the platform has no NCCL)
    Unusable,  // opened, but it has no ncclGetVersion or it failed (not NCCL, or older than 2.9)
    Refused,   // CUDYN_NCCL_PATH is not absolute; nothing was opened
};

const char* to_string(NcclState state) noexcept;  // "loaded", "not_found", ...

struct NcclReport {
    NcclState state = NcclState::NotFound;
    // Every path tried, in order: the override alone when it is set; else
    // "libnccl.so.2" (the system's search, which also finds one a Python
    // program has loaded already), then nvidia/nccl/lib/libnccl.so.2 under
    // each Python package folder (the nvidia-nccl wheel's place): those of
    // $PYTHONPATH, $VIRTUAL_ENV, each <prefix>/bin on $PATH, ~/.local and
    // the system's.
    std::vector<std::string> tried;
    std::string library_path;  // the real path of what was opened, empty if nothing was
    std::string message;       // why, in words, when state != Loaded
    int version = 0;           // ncclGetVersion: 22803 for 2.28.3
    // NCCL entries cudyn can use that this library lacks ("ncclCommWindowRegister").
    std::vector<std::string> missing_entries;
};

// Loads NCCL on first call (thread-safe, once per process) and reports.
const NcclReport& nccl_report();

// Success when NCCL is loaded; otherwise DriverNotFound (not found),
// DriverRefused (a relative override) or DriverInitFailed, naming NCCL.
Result<void> nccl_status();

}  // namespace cudyn
