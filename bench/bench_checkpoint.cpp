// cudyn-bench — checkpoint and restore of another process: ProcessCheckpoint
// against the raw cuCheckpointProcess* calls, on a target holding 1 GiB (and
// 16 GiB) of device memory. Each round locks, checkpoints, restores and
// unlocks the same target once per side; the sides alternate which goes
// first. The time of a round is checkpoint + restore (what moves the bytes);
// lock and unlock are in the extra numbers. The onto-other-GPU case restores
// with device 0 and device 1 swapped, so the target changes GPU every cycle.
#include "harness.hpp"

#include "cudyn/checkpoint/process_checkpoint.hpp"
#include "cudyn/checkpoint/restore_placement.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/loader.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/vmm/growable_buffer.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace cudyn::bench {
namespace {

constexpr std::size_t kGiB = std::size_t{1} << 30;

// The target: `gib` GiB on device 0 (memset, so the pages are real), 'r' on
// stdout, then it waits for its stdin to close.
int hold(std::size_t gib) {
    auto device = Device::get(0);
    if (!device) return 1;
    auto context = PrimaryContext::activate(*device);
    auto buffer = DeviceBuffer<unsigned char>::allocate(gib * kGiB);
    if (!context || !buffer) return kChildSkip;
    if (!buffer->fill(0x5a)) return 1;
    if (::write(STDOUT_FILENO, "r", 1) != 1) return 1;
    char byte = 0;
    while (::read(STDIN_FILENO, &byte, 1) == 1) {
    }
    return 0;
}
int hold_1gib() { return hold(1); }
int hold_16gib() { return hold(16); }
const ChildRegistrar hold_1gib_child("checkpoint-hold-1gib", hold_1gib);
const ChildRegistrar hold_16gib_child("checkpoint-hold-16gib", hold_16gib);

// A target process for the case's length; pid 0 when it did not get ready.
struct Target {
    pid_t pid = 0;
    int to_target = -1;
    explicit Target(const char* child) {
        int in[2], out[2];
        // Close-on-exec: the child must not hold the write end of its own stdin.
        if (::pipe2(in, O_CLOEXEC) != 0) return;
        if (::pipe2(out, O_CLOEXEC) != 0) {
            ::close(in[0]);
            ::close(in[1]);
            return;
        }
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
        posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
        char* argv[] = {const_cast<char*>("/proc/self/exe"), const_cast<char*>("--child"), const_cast<char*>(child),
                        nullptr};
        const int failed_spawn = ::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv, environ);
        posix_spawn_file_actions_destroy(&actions);
        ::close(in[0]);
        ::close(out[1]);
        to_target = in[1];
        char ready = 0;
        if (failed_spawn != 0 || ::read(out[0], &ready, 1) != 1 || ready != 'r') {
            if (failed_spawn == 0) stop();
            pid = 0;
        }
        ::close(out[0]);
    }
    void stop() {
        if (to_target >= 0) ::close(to_target);
        to_target = -1;
        if (pid > 0) ::waitpid(pid, nullptr, 0);
    }
    ~Target() { stop(); }
};

struct Steps {
    double lock = 0, checkpoint = 0, restore = 0, unlock = 0;
};

// The raw restore's GPU pairs for `placement` (empty: in place).
std::vector<CUcheckpointGpuPair> raw_pairs(const RestorePlacement& placement) {
    std::vector<CUcheckpointGpuPair> pairs;
    for (const RestorePlacement::Move& move : placement.moves()) {
        CUcheckpointGpuPair pair;
        std::memcpy(pair.oldUuid.bytes, move.from.bytes.data(), sizeof pair.oldUuid.bytes);
        std::memcpy(pair.newUuid.bytes, move.to.bytes.data(), sizeof pair.newUuid.bytes);
        pairs.push_back(pair);
    }
    return pairs;
}

Result<Steps> raw_cycle(int pid, const RestorePlacement& placement = {}) {
    const DriverTable& cu = driver();
    Steps s;
    CUcheckpointLockArgs lock_args;
    std::memset(&lock_args, 0, sizeof lock_args);
    CUcheckpointCheckpointArgs checkpoint_args;
    std::memset(&checkpoint_args, 0, sizeof checkpoint_args);
    CUcheckpointRestoreArgs restore_args;
    std::memset(&restore_args, 0, sizeof restore_args);
    std::vector<CUcheckpointGpuPair> pairs = raw_pairs(placement);
    if (!pairs.empty()) {
        restore_args.gpuPairs = pairs.data();
        restore_args.gpuPairsCount = static_cast<unsigned int>(pairs.size());
    }
    CUcheckpointUnlockArgs unlock_args;
    std::memset(&unlock_args, 0, sizeof unlock_args);
    auto t = Clock::now();
    CUresult rc = cu.cuCheckpointProcessLock_v12080(pid, &lock_args);
    s.lock = elapsed_ms(t, Clock::now());
    t = Clock::now();
    if (rc == CUDA_SUCCESS) rc = cu.cuCheckpointProcessCheckpoint_v12080(pid, &checkpoint_args);
    s.checkpoint = elapsed_ms(t, Clock::now());
    t = Clock::now();
    if (rc == CUDA_SUCCESS) rc = cu.cuCheckpointProcessRestore_v12080(pid, &restore_args);
    s.restore = elapsed_ms(t, Clock::now());
    t = Clock::now();
    if (rc == CUDA_SUCCESS) rc = cu.cuCheckpointProcessUnlock_v12080(pid, &unlock_args);
    s.unlock = elapsed_ms(t, Clock::now());
    if (rc != CUDA_SUCCESS) return Error::from_driver(rc, "cuCheckpointProcess*");
    return s;
}

Result<Steps> cudyn_cycle(int pid, const RestorePlacement& placement = {}) {
    Steps s;
    auto t = Clock::now();
    CUDYN_TRY_ASSIGN(auto owner, ProcessCheckpoint::lock(pid));
    s.lock = elapsed_ms(t, Clock::now());
    t = Clock::now();
    CUDYN_TRY(owner.checkpoint());
    s.checkpoint = elapsed_ms(t, Clock::now());
    t = Clock::now();
    CUDYN_TRY(owner.restore(placement));
    s.restore = elapsed_ms(t, Clock::now());
    t = Clock::now();
    CUDYN_TRY(owner.unlock());
    s.unlock = elapsed_ms(t, Clock::now());
    return s;
}

// `swap_gpus`: every restore swaps device 0 and device 1 (both sides), so the
// target moves to the other GPU each cycle.
CaseResult cycle(const Settings& settings, const char* child, std::size_t gib, bool swap_gpus = false) {
    if (auto present = process_state(static_cast<int>(::getpid())); !present) return skipped(present.error().describe());
    RestorePlacement placement;
    if (swap_gpus) {
        auto count = Device::count();
        if (!count) return failed(count.error().describe());
        if (*count < 2) return skipped("one device: restoring onto another GPU needs two");
        auto swapped = placement.swap(*Device::get(0), *Device::get(1));
        if (!swapped) return failed(swapped.error().describe());
    }
    Target target(child);
    if (target.pid <= 0) return skipped("the target could not hold " + std::to_string(gib) + " GiB on device 0");
    const int pid = static_cast<int>(target.pid);
    const int rounds = settings.value_or_repetitions(3);
    CaseResult result;
    Steps raw_sum, cudyn_sum;
    for (int round = 0; round < rounds; ++round) {
        for (int side = 0; side < 2; ++side) {
            const bool raw_side = (side == 0) == (round % 2 == 0);
            auto steps = raw_side ? raw_cycle(pid, placement) : cudyn_cycle(pid, placement);
            if (!steps) return failed(steps.error().describe());
            (raw_side ? result.raw_samples : result.cudyn_samples).push_back(steps->checkpoint + steps->restore);
            Steps& sum = raw_side ? raw_sum : cudyn_sum;
            sum.lock += steps->lock;
            sum.checkpoint += steps->checkpoint;
            sum.restore += steps->restore;
            sum.unlock += steps->unlock;
        }
    }
    result.raw = median(result.raw_samples);
    result.cudyn = median(result.cudyn_samples);
    result.operation = "checkpoint+restore of a process holding " + std::to_string(gib) + " GiB" +
                       (swap_gpus ? ", restored onto the other GPU" : "");
    result.unit = "ms";
    result.iterations = 1;
    result.samples = rounds;
    result.statistic = "median";
    const double n = rounds;
    result.extra = {{"raw_lock_ms", raw_sum.lock / n},           {"cudyn_lock_ms", cudyn_sum.lock / n},
                    {"raw_checkpoint_ms", raw_sum.checkpoint / n}, {"cudyn_checkpoint_ms", cudyn_sum.checkpoint / n},
                    {"raw_restore_ms", raw_sum.restore / n},       {"cudyn_restore_ms", cudyn_sum.restore / n},
                    {"raw_unlock_ms", raw_sum.unlock / n},         {"cudyn_unlock_ms", cudyn_sum.unlock / n}};
    const double bytes = static_cast<double>(gib * kGiB);
    result.notes.push_back(format("cudyn side, mean: checkpoint %.2f GB/s", bytes / (cudyn_sum.checkpoint / n) / 1e6) +
                           format(", restore %.2f GB/s", bytes / (cudyn_sum.restore / n) / 1e6));
    add_target_note(result, swap_gpus ? "checkpoint+restore onto the other GPU" : "checkpoint+restore", 1.05);
    return result;
}

// The other way to give a GPU's memory back for a while: memory this
// process owns, saved to pinned host memory and released
// (GrowableBuffer::release_physical(Save)), then restored. "raw" here is the
// driver's checkpoint + restore of a process holding as much.
CaseResult growable_against_driver(const Settings& settings) {
    if (auto present = process_state(static_cast<int>(::getpid())); !present) return skipped(present.error().describe());
    auto context = PrimaryContext::activate(*Device::get(0));
    if (!context) return failed(context.error().describe());
    auto buffer = GrowableBuffer::create(AllocationProperties::device(0), kGiB);
    if (!buffer) return skipped(buffer.error().describe());
    if (auto grown = buffer->grow_to(kGiB); !grown) return failed(grown.error().describe());
    Target target("checkpoint-hold-1gib");
    if (target.pid <= 0) return skipped("the target could not hold 1 GiB on device 0");
    const int rounds = settings.value_or_repetitions(3);
    CaseResult result;
    for (int round = 0; round < rounds; ++round) {
        auto steps = raw_cycle(static_cast<int>(target.pid));
        if (!steps) return failed(steps.error().describe());
        result.raw_samples.push_back(steps->checkpoint + steps->restore);
        const auto start = Clock::now();
        if (auto released = buffer->release_physical(GrowableBuffer::Contents::Save); !released)
            return failed(released.error().describe());
        if (auto restored = buffer->restore(); !restored) return failed(restored.error().describe());
        result.cudyn_samples.push_back(elapsed_ms(start, Clock::now()));
    }
    result.raw = median(result.raw_samples);
    result.cudyn = median(result.cudyn_samples);
    result.operation = "1 GiB: GrowableBuffer save+release+restore vs the driver's process checkpoint+restore";
    result.unit = "ms";
    result.iterations = 1;
    result.samples = rounds;
    result.statistic = "median";
    result.notes.push_back("here cudyn is GrowableBuffer::release_physical(Save) + restore() in this process and raw "
                           "is cuCheckpointProcessCheckpoint + Restore of another process holding as much: below 1 "
                           "means the program's own save is quicker");
    return result;
}

CaseResult cycle_1gib(const Settings& settings) { return cycle(settings, "checkpoint-hold-1gib", 1); }
CaseResult cycle_16gib(const Settings& settings) { return cycle(settings, "checkpoint-hold-16gib", 16); }
CaseResult onto_other_gpu_1gib(const Settings& settings) { return cycle(settings, "checkpoint-hold-1gib", 1, true); }

const CaseRegistrar cycle_1gib_case({"checkpoint/cycle-1GiB",
                                     "ProcessCheckpoint lock+checkpoint+restore+unlock of a process holding 1 GiB "
                                     "vs the raw calls",
                                     true, cycle_1gib});
const CaseRegistrar cycle_16gib_case({"checkpoint/cycle-16GiB",
                                      "ProcessCheckpoint lock+checkpoint+restore+unlock of a process holding 16 GiB "
                                      "vs the raw calls",
                                      true, cycle_16gib});

const CaseRegistrar onto_other_case({"checkpoint/onto-other-gpu-1GiB",
                                      "as checkpoint/cycle-1GiB, each restore swapping device 0 and device 1 (the "
                                      "target moves GPU every cycle) vs the raw calls with the same GPU pairs",
                                      true, onto_other_gpu_1gib});

const CaseRegistrar growable_case({"checkpoint/growable-vs-driver-1GiB",
                                   "GrowableBuffer release_physical(Save)+restore of 1 GiB vs the driver's checkpoint+"
                                   "restore of a process holding 1 GiB",
                                   true, growable_against_driver});

}  // namespace
}  // namespace cudyn::bench
