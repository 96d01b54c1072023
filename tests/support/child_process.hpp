// Test-side child processes that start fresh: the test binary runs itself
// again (/proc/self/exe) as `--cudyn-test-child ROLE ARGS...`, so the child
// loads the driver from scratch, as a real second process does (the CUDA
// driver does not survive fork() after it was initialised, and a forked child
// would share the parent's fake-driver state and mappings).
//
//     int consumer(int argc, char** argv);            // returns the child's exit status
//     const cudyn_test::ChildRole consumer_role("ipc-consumer", consumer);
//     ...
//     auto child = cudyn_test::ChildProcess::spawn("ipc-consumer", {"0"}, channel_end.get());
//     CHECK(child.wait(std::chrono::seconds(20)) == 0);   // bounded: killed after the timeout
//
// test_main.cpp dispatches the hidden argument before Catch2 sees it. The fd
// handed to the child is at kChildChannelFd there (not close-on-exec). POSIX only.
#pragma once

#if !defined(_WIN32)

#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace cudyn_test {

inline constexpr const char* kChildFlag = "--cudyn-test-child";
inline constexpr int kChildChannelFd = 3;

using ChildMain = int (*)(int argc, char** argv);  // the arguments after the role

inline std::vector<std::pair<std::string, ChildMain>>& child_roles() {
    static std::vector<std::pair<std::string, ChildMain>> roles;
    return roles;
}

struct ChildRole {
    ChildRole(const char* name, ChildMain main) { child_roles().emplace_back(name, main); }
};

// In main(): -1 when this is no child invocation, else the role's exit status.
inline int run_child_role_if_asked(int argc, char** argv) {
    if (argc < 3 || std::strcmp(argv[1], kChildFlag) != 0) return -1;
    for (const auto& [name, main] : child_roles())
        if (name == argv[2]) return main(argc - 3, argv + 3);
    std::fprintf(stderr, "unknown child role '%s'\n", argv[2]);
    return 2;
}

class ChildProcess {
public:
    // Starts this executable in role `role`. `channel_fd` (-1: none) becomes
    // kChildChannelFd in the child. pid() is 0 when it could not start.
    static ChildProcess spawn(const std::string& role, const std::vector<std::string>& args = {},
                              int channel_fd = -1) {
        std::vector<std::string> words = {"/proc/self/exe", kChildFlag, role};
        words.insert(words.end(), args.begin(), args.end());
        std::vector<char*> argv;
        for (std::string& word : words) argv.push_back(word.data());
        argv.push_back(nullptr);

        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        int spare = -1;
        if (channel_fd >= 0) {
            // dup2 onto itself would keep close-on-exec: go through a spare number.
            int source = channel_fd;
            if (source == kChildChannelFd) source = spare = ::dup(channel_fd);
            posix_spawn_file_actions_adddup2(&actions, source, kChildChannelFd);
        }
        pid_t pid = 0;
        const int failed = ::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&actions);
        if (spare >= 0) ::close(spare);
        if (failed != 0) {
            std::fprintf(stderr, "posix_spawn: %s\n", std::strerror(failed));
            pid = 0;
        }
        return ChildProcess(pid);
    }

    ChildProcess(ChildProcess&& other) noexcept : pid_(std::exchange(other.pid_, 0)) {}
    ChildProcess& operator=(ChildProcess&&) = delete;
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;
    // A child still running is killed and reaped: a test never leaves one behind.
    ~ChildProcess() { (void)wait(std::chrono::milliseconds(0)); }

    pid_t pid() const noexcept { return pid_; }

    // Waits at most `timeout` for the child, then kills it (SIGKILL). Returns
    // its exit status; 128 + N when signal N ended it; -1 when it could not
    // be started or had to be killed.
    int wait(std::chrono::milliseconds timeout) {
        if (pid_ <= 0) return -1;
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        int status = 0;
        for (;;) {
            const pid_t done = ::waitpid(pid_, &status, WNOHANG);
            if (done == pid_) break;
            if (done < 0) {
                pid_ = 0;
                return -1;
            }
            if (std::chrono::steady_clock::now() >= deadline) {
                std::fprintf(stderr, "child %d did not finish in time: killed\n", static_cast<int>(pid_));
                ::kill(pid_, SIGKILL);
                ::waitpid(pid_, &status, 0);
                pid_ = 0;
                return -1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        pid_ = 0;
        if (WIFEXITED(status)) return WEXITSTATUS(status);
        if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
        return -1;
    }

private:
    explicit ChildProcess(pid_t pid) noexcept : pid_(pid) {}
    pid_t pid_ = 0;
};

// What a child role checks, reported on stderr: the child has no Catch2
// session, so it counts its own failures and exits 1 when there were any.
class ChildChecks {
public:
    explicit ChildChecks(const char* role) : role_(role) {}
    bool expect(bool ok, const std::string& what) {
        if (!ok) {
            ++failures_;
            std::fprintf(stderr, "[child %s] check failed: %s\n", role_, what.c_str());
        }
        return ok;
    }
    int exit_status() const { return failures_ == 0 ? 0 : 1; }

private:
    const char* role_;
    int failures_ = 0;
};

}  // namespace cudyn_test

#endif  // !_WIN32
