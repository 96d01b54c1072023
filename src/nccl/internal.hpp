// cudyn nccl — the loaded NCCL entries and the errors built from NCCL's answers.
#pragma once

#include "cudyn/core/error.hpp"
#include "cudyn/core/result.hpp"
#include "nccl/nccl_api.hpp"

#include <string>
#include <vector>

namespace cudyn::nccl {

// Every entry cudyn resolves: its slot, its shape, its name, and the NCCL
// release that brought it (major, minor), which a NotSupported names.
#define CUDYN_NCCL_ENTRIES(X)                                           \
    X(get_version, GetVersion, "ncclGetVersion", 2, 9)                  \
    X(get_error_string, GetErrorString, "ncclGetErrorString", 2, 4)     \
    X(get_last_error, GetLastError, "ncclGetLastError", 2, 13)          \
    X(get_unique_id, GetUniqueId, "ncclGetUniqueId", 2, 0)              \
    X(comm_init_rank, CommInitRank, "ncclCommInitRank", 2, 0)           \
    X(comm_finalize, CommFinalize, "ncclCommFinalize", 2, 14)           \
    X(comm_destroy, CommDestroy, "ncclCommDestroy", 2, 0)               \
    X(comm_register, CommRegister, "ncclCommRegister", 2, 19)           \
    X(comm_deregister, CommDeregister, "ncclCommDeregister", 2, 19)     \
    X(comm_window_register, CommWindowRegister, "ncclCommWindowRegister", 2, 27) \
    X(comm_window_deregister, CommWindowDeregister, "ncclCommWindowDeregister", 2, 27) \
    X(all_reduce, AllReduce, "ncclAllReduce", 2, 0)                     \
    X(broadcast, Broadcast, "ncclBroadcast", 2, 0)                      \
    X(mem_alloc, MemAlloc, "ncclMemAlloc", 2, 19)                       \
    X(mem_free, MemFree, "ncclMemFree", 2, 19)                          \
    X(group_start, GroupStart, "ncclGroupStart", 2, 0)                  \
    X(group_end, GroupEnd, "ncclGroupEnd", 2, 0)

// Resolved once, at the first nccl_report(); a null entry is one this NCCL lacks.
struct Table {
#define CUDYN_NCCL_SLOT(member, shape, name, major, minor) Pfn::shape member = nullptr;
    CUDYN_NCCL_ENTRIES(CUDYN_NCCL_SLOT)
#undef CUDYN_NCCL_SLOT
};

// Where the nvidia-nccl wheel's library may be, in the order tried after the
// system's search: nvidia/nccl/lib/libnccl.so.2 under each Python package
// folder (nccl_library.hpp says which). Read from the environment now.
std::vector<std::string> wheel_candidates();

// The table when NCCL is loaded, else NCCL's load error naming `operation`.
Result<const Table*> usable_table(const char* operation);

// `fn` when the loaded NCCL has it; else NotSupported naming `entry`, the
// release that brought it and the NCCL that was loaded.
Error missing_entry(const char* entry, const char* operation);
template <typename Fn>
Result<Fn> need(Fn fn, const char* entry, const char* operation) {
    if (fn == nullptr) return missing_entry(entry, operation);
    return fn;
}

// NCCL's answer `result` from `entry` as an Error (Driver, the message naming
// the ncclResult_t, NCCL's words for it and, with a communicator, its last
// error text); ok() for ncclSuccess.
Result<void> check(int result, const char* entry, const char* operation, Comm comm = nullptr);

}  // namespace cudyn::nccl

namespace cudyn::detail {

// What NcclCommunicator and every registration on it share: NCCL's
// communicator, destroyed (ncclCommDestroy) with the last share.
struct NcclCommState {
    nccl::Comm comm = nullptr;
    int rank = 0;
    int rank_count = 0;

    NcclCommState() = default;
    NcclCommState(const NcclCommState&) = delete;
    NcclCommState& operator=(const NcclCommState&) = delete;
    ~NcclCommState();
    // ncclCommDestroy now (once); its answer.
    Result<void> destroy();
};

}  // namespace cudyn::detail
