// cudyn — who exported an IPC descriptor: this process's id plus a random
// token drawn once per process, so that two processes with the same id (pid
// namespaces, containers) are still told apart and a process never opens its
// own handle, which CUDA forbids.
//
// After the first use (drawn while the library loads) reading it is two loads.
#pragma once

#include <atomic>
#include <cstdint>

namespace cudyn::detail {

struct ProcessIdentity {
    std::uint64_t pid = 0;
    std::uint64_t token = 0;
};

// Published by the first this_process() (process_identity.cpp): the token is 0 until
// drawn; the pid is kept current in a fork() child.
extern std::atomic<std::uint64_t> process_token;
extern std::atomic<std::uint64_t> process_pid;
// The first use: draws the token (once, thread-safe) and publishes both.
ProcessIdentity first_process_identity() noexcept;

inline ProcessIdentity this_process() noexcept {
    const std::uint64_t token = process_token.load(std::memory_order_acquire);
    if (token == 0) return first_process_identity();
    return ProcessIdentity{process_pid.load(std::memory_order_relaxed), token};
}

bool is_this_process(std::uint64_t pid, std::uint64_t token) noexcept;

}  // namespace cudyn::detail
