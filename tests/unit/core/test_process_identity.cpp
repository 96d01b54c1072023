// The exporter identity the IPC descriptors carry (process_identity.hpp):
// the real pid, a token that is drawn once and never 0, and, in a fork()
// child, a new pid, so that the child does not take its parent's descriptors
// for its own. Runs with no driver.
#include "support/catch.hpp"

#include "core/process_identity.hpp"

#include <cstdint>
#include <thread>
#include <vector>

#if defined(_WIN32)
#include <process.h>
#else
#include <sys/wait.h>
#include <unistd.h>
#endif

namespace {
std::uint64_t system_pid() {
#if defined(_WIN32)
    return static_cast<std::uint64_t>(::_getpid());
#else
    return static_cast<std::uint64_t>(::getpid());
#endif
}
}  // namespace

TEST_CASE("process identity: the real pid and one non-zero token, the same from every thread", "[unit]") {
    std::vector<cudyn::detail::ProcessIdentity> seen(8);
    std::vector<std::thread> threads;
    // The first uses race on purpose: exactly one token must come out.
    for (auto& slot : seen) threads.emplace_back([&slot] { slot = cudyn::detail::this_process(); });
    for (auto& thread : threads) thread.join();

    const cudyn::detail::ProcessIdentity self = cudyn::detail::this_process();
    CHECK(self.pid == system_pid());
    CHECK(self.token != 0);
    for (const auto& identity : seen) {
        CHECK(identity.pid == self.pid);
        CHECK(identity.token == self.token);
    }
    CHECK(cudyn::detail::is_this_process(self.pid, self.token));
    CHECK_FALSE(cudyn::detail::is_this_process(self.pid, self.token ^ 1));
    CHECK_FALSE(cudyn::detail::is_this_process(self.pid + 1, self.token));
}

#if !defined(_WIN32)
TEST_CASE("process identity: a fork() child has its own pid and is not its parent", "[unit]") {
    const cudyn::detail::ProcessIdentity parent = cudyn::detail::this_process();
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // Exit codes: 0 all good, 1 stale pid, 2 still "the parent".
        const cudyn::detail::ProcessIdentity self = cudyn::detail::this_process();
        if (self.pid != static_cast<std::uint64_t>(::getpid())) ::_exit(1);
        if (cudyn::detail::is_this_process(parent.pid, parent.token)) ::_exit(2);
        ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(cudyn::detail::this_process().pid == parent.pid);
}
#endif
