// checkpoint_restore — one process checkpoints another that holds device
// memory, brings it back (optionally onto another GPU), and the other checks
// every byte.
//
//   ./build/examples/checkpoint_restore [--mib N] [--onto D]
//
// The program starts itself again as the target: the target fills N MiB
// (default 256) of device memory on device 0 with known words and waits.
// This process then locks the target, checkpoints it (the target's device
// memory goes to host memory and the GPU's is given back), restores it, and
// unlocks it. With --onto D the restore swaps device 0 and device D: the
// target keeps ordinal 0, now backed by the other GPU. The target then reads
// its memory back, compares every word, and says which GPU it is on.
// Exits 0 when the driver cannot checkpoint processes (it says so), 1 on
// an error or a wrong byte. Linux only (the target is a second process).
#include "example_support.hpp"

#include "cudyn/checkpoint/process_checkpoint.hpp"
#include "cudyn/memory/device_buffer.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

using namespace cudyn_example;
using Clock = std::chrono::steady_clock;

namespace {

std::uint32_t word_at(std::size_t i) { return static_cast<std::uint32_t>(i * 2654435761u) ^ 0xC0DEu; }

// The target: fills, says 'r' on stdout, waits for a byte on stdin, checks.
int run_target(std::size_t mib) {
    auto context = activate_device(0);
    if (!context) return fail("target: device 0", context.error());
    const std::size_t words = mib * (std::size_t{1} << 20) / sizeof(std::uint32_t);
    auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(words);
    if (!buffer) return fail("target: DeviceBuffer::allocate", buffer.error());
    std::vector<std::uint32_t> host(words);
    for (std::size_t i = 0; i < words; ++i) host[i] = word_at(i);
    if (auto in = buffer->copy_from(cudyn::HostSpan<const std::uint32_t>(host)); !in) return fail("target: copy in", in.error());
    auto before = cudyn::Device::get(0)->uuid();
    std::fprintf(stderr, "target %d: %zu MiB on device 0 (%s)\n", static_cast<int>(::getpid()), mib,
                 before ? before->to_string().c_str() : "?");
    if (::write(STDOUT_FILENO, "r", 1) != 1) return 1;
    char go = 0;
    if (::read(STDIN_FILENO, &go, 1) != 1) return 1;
    std::fill(host.begin(), host.end(), 0u);
    if (auto out = buffer->copy_to(cudyn::HostSpan<std::uint32_t>(host)); !out) return fail("target: copy out", out.error());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < words; ++i) wrong += host[i] != word_at(i);
    auto after = cudyn::Device::get(0)->uuid();
    std::fprintf(stderr, "target %d: device 0 is now %s; %zu of %zu words wrong\n", static_cast<int>(::getpid()),
                 after ? after->to_string().c_str() : "?", wrong, words);
    return wrong == 0 ? 0 : 1;
}

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t mib = 256;
    int onto = -1;
    bool target = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--mib") == 0 && i + 1 < argc) mib = std::strtoul(argv[++i], nullptr, 10);
        else if (std::strcmp(argv[i], "--onto") == 0 && i + 1 < argc) onto = std::atoi(argv[++i]);
        else if (std::strcmp(argv[i], "--target") == 0) target = true;
        else {
            std::fprintf(stderr, "usage: %s [--mib N] [--onto DEVICE]\n", argv[0]);
            return 1;
        }
    }
    if (mib == 0) mib = 1;
    if (target) return run_target(mib);

    // Asked first: a driver without the entries cannot run the example.
    if (auto own = cudyn::process_state(static_cast<int>(::getpid())); !own)
        return unsupported_or_fail("process_state", own.error());
    cudyn::RestorePlacement placement;
    if (onto >= 0) {
        auto zero = cudyn::Device::get(0);
        auto other = cudyn::Device::get(onto);
        if (!zero || !other) return fail("--onto", !zero ? zero.error() : other.error());
        if (auto swapped = placement.swap(*zero, *other); !swapped) return fail("RestorePlacement::swap", swapped.error());
    }

    // The target: this program again, its stdin and stdout our pipes.
    int to_target[2], from_target[2];
    // Close-on-exec: the target keeps only its stdin and stdout.
    if (::pipe2(to_target, O_CLOEXEC) != 0 || ::pipe2(from_target, O_CLOEXEC) != 0) return 1;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_target[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, from_target[1], STDOUT_FILENO);
    const std::string size = std::to_string(mib);
    char* child_argv[] = {argv[0], const_cast<char*>("--target"), const_cast<char*>("--mib"),
                          const_cast<char*>(size.c_str()), nullptr};
    pid_t pid = 0;
    const int spawned = ::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, child_argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(to_target[0]);
    ::close(from_target[1]);
    if (spawned != 0) return 1;
    char ready = 0;
    if (::read(from_target[0], &ready, 1) != 1 || ready != 'r') {
        std::fprintf(stderr, "the target did not start\n");
        ::waitpid(pid, nullptr, 0);
        return 1;
    }

    int status = 1;
    {
        const auto t0 = Clock::now();
        auto owner = cudyn::ProcessCheckpoint::lock(static_cast<int>(pid), std::chrono::seconds(10));
        if (!owner) return fail("ProcessCheckpoint::lock", owner.error());
        const double lock_ms = ms_since(t0);
        const auto t1 = Clock::now();
        if (auto done = owner->checkpoint(); !done) return fail("checkpoint", done.error());
        const double checkpoint_ms = ms_since(t1);
        std::printf("target %d: locked in %.1f ms, checkpointed in %.1f ms (state: %s)\n", static_cast<int>(pid),
                    lock_ms, checkpoint_ms, cudyn::to_string(*cudyn::process_state(static_cast<int>(pid))));
        const auto t2 = Clock::now();
        if (auto done = owner->restore(placement); !done) return fail("restore", done.error());
        const double restore_ms = ms_since(t2);
        if (auto done = owner->unlock(); !done) return fail("unlock", done.error());
        std::printf("target %d: restored%s in %.1f ms and unlocked (state: %s)\n", static_cast<int>(pid),
                    onto >= 0 ? (" onto device " + std::to_string(onto)).c_str() : "", restore_ms,
                    cudyn::to_string(*cudyn::process_state(static_cast<int>(pid))));
    }
    if (::write(to_target[1], "v", 1) != 1) return 1;
    int wait_status = 0;
    ::waitpid(pid, &wait_status, 0);
    status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 1;
    std::printf("target %d: %s\n", static_cast<int>(pid), status == 0 ? "every byte intact" : "FAILED its check");
    return status;
}
