// cudyn — internals shared by the IPC modules (ipc_memory, opened_mem,
// ipc_event). Not installed.
#pragma once

#include <cstdint>

namespace cudyn::detail {

// Who a descriptor was exported by: the process id, and a random token drawn
// once per process so that two processes with the same id (pid namespaces,
// containers) are still told apart.
struct ProcessIdentity {
    std::uint64_t pid = 0;
    std::uint64_t token = 0;
};
ProcessIdentity this_process() noexcept;
bool is_this_process(std::uint64_t pid, std::uint64_t token) noexcept;

}  // namespace cudyn::detail
