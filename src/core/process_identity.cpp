// cudyn — the process identity IPC descriptors carry (process_identity.hpp).
#include "core/process_identity.hpp"

#include "cudyn/loader/driver_call.hpp"

#if defined(_WIN32)
#include <process.h>
#else
#include <pthread.h>
#include <unistd.h>
#endif

#include <chrono>
#include <random>

namespace cudyn::detail {

std::atomic<std::uint64_t> process_token{0};
std::atomic<std::uint64_t> process_pid{0};

namespace {
std::uint64_t current_pid() noexcept {
#if defined(_WIN32)
    return static_cast<std::uint64_t>(::_getpid());
#else
    return static_cast<std::uint64_t>(::getpid());
#endif
}

// getpid() is a system call (hundreds of ns in some VMs) on every export: the
// id is kept, and a fork() child refreshes its copy (pthread_atfork).
#if !defined(_WIN32)
void refresh_pid_after_fork() noexcept { process_pid.store(current_pid(), std::memory_order_relaxed); }
#endif

// Never 0 (0 means "not drawn yet"). Where the system has no random source
// (random_device throws), the clock and a stack address still separate two
// processes that share a pid in different namespaces.
std::uint64_t draw_token() noexcept {
    std::uint64_t token = 0;
    try {
        std::random_device source;
        token = (static_cast<std::uint64_t>(source()) << 32) ^ source();
    } catch (...) {
        const auto now = std::chrono::high_resolution_clock::now().time_since_epoch().count();
        token = static_cast<std::uint64_t>(now) ^
                (static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&token)) << 20);
    }
    return token != 0 ? token : 1;
}
}  // namespace

// Cold and out of line: its random_device is kilobytes of stack that the
// callers' paths should not carry.
CUDYN_DETAIL_COLD ProcessIdentity first_process_identity() noexcept {
    // A function-local static: one thread draws, any other first caller waits.
    static const std::uint64_t token = [] {
        process_pid.store(current_pid(), std::memory_order_relaxed);
#if !defined(_WIN32)
        (void)::pthread_atfork(nullptr, nullptr, refresh_pid_after_fork);
#endif
        const std::uint64_t drawn = draw_token();
        process_token.store(drawn, std::memory_order_release);  // publishes the pid stored above too
        return drawn;
    }();
    return ProcessIdentity{process_pid.load(std::memory_order_relaxed), token};
}

namespace {
// Drawn while the library loads, not inside the first export or open, whose
// cost it would otherwise be (a random_device read: microseconds).
const ProcessIdentity drawn_at_load = first_process_identity();
}  // namespace

bool is_this_process(std::uint64_t pid, std::uint64_t token) noexcept {
    const ProcessIdentity self = this_process();
    return pid == self.pid && token == self.token;
}

}  // namespace cudyn::detail
