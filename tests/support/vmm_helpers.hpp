// Helpers the fake and gpu suites share (the VMM suites first): a Result's
// value or its error, filling and reading device memory through the driver
// table, and touching an address in a child process.
#pragma once

#include "catch.hpp"

#include "cudyn/loader/driver_call.hpp"

#if !defined(_WIN32)
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cudyn_test {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// The value of a Result that must have one (the error described otherwise).
template <typename T>
T take(cudyn::Result<T> result) {
    INFO((result.has_value() ? std::string() : result.error().describe()));
    REQUIRE(result.has_value());
    return std::move(*result);
}

inline void require_ok(const cudyn::Result<void>& result) {
    INFO((result.has_value() ? std::string() : result.error().describe()));
    REQUIRE(result.has_value());
}

// cuMemsetD32 of `bytes` (a multiple of 4) at `address`, waited for (the
// driver returns memsets of device memory before the device has done them).
inline void fill32(CUdeviceptr address, std::size_t bytes, std::uint32_t value) {
    auto set = cudyn::call_driver(&cudyn::DriverTable::cuMemsetD32_v3020, address, value, bytes / 4);
    if (set) set = cudyn::call_driver(&cudyn::DriverTable::cuStreamSynchronize_v2000, CU_STREAM_LEGACY);
    INFO((set.has_value() ? std::string() : set.error().describe()));
    REQUIRE(set.has_value());
}

// cuMemcpyDtoH of `bytes` (a multiple of 4) from `address`.
inline std::vector<std::uint32_t> read32(CUdeviceptr address, std::size_t bytes) {
    std::vector<std::uint32_t> words(bytes / 4);
    auto copy = cudyn::call_driver(&cudyn::DriverTable::cuMemcpyDtoH_v3020, words.data(), address, bytes);
    INFO((copy.has_value() ? std::string() : copy.error().describe()));
    REQUIRE(copy.has_value());
    return words;
}

// True when every word of [address, address + bytes) is `value`.
inline bool all_equal(CUdeviceptr address, std::size_t bytes, std::uint32_t value) {
    for (std::uint32_t word : read32(address, bytes))
        if (word != value) return false;
    return true;
}

#if !defined(_WIN32)
// Forks a child that reads (and, with `write`, writes) one byte at `address`
// through its host address (the fake driver's device addresses are host
// addresses). Returns the signal that killed the child, 0 when it exited
// cleanly, -1 when it exited otherwise or hung (killed after ~10 s).
inline int touch_in_child(std::uintptr_t address, bool write) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        // The default action, whatever a sanitizer installed: die by the signal.
        struct sigaction default_action {};
        default_action.sa_handler = SIG_DFL;
        ::sigaction(SIGSEGV, &default_action, nullptr);
        ::sigaction(SIGBUS, &default_action, nullptr);
        auto* byte = reinterpret_cast<volatile unsigned char*>(address);
        const unsigned char seen = *byte;
        if (write) *byte = static_cast<unsigned char>(seen + 1);
        ::_exit(0);
    }
    int status = 0;
    for (int waited = 0; waited < 1000; ++waited) {
        const pid_t done = ::waitpid(pid, &status, WNOHANG);
        if (done == pid) {
            if (WIFSIGNALED(status)) return WTERMSIG(status);
            return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
        }
        ::usleep(10000);
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return -1;
}
#endif  // !_WIN32

}  // namespace cudyn_test
