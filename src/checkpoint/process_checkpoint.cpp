// cudyn — the owner of a checkpoint sequence on another process.
#include "cudyn/checkpoint/process_checkpoint.hpp"

#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/loader.hpp"
#include "core/internal.hpp"
#include "core/process_identity.hpp"

#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace cudyn {

namespace {
constexpr detail::Operation kLock{"ProcessCheckpoint::lock"};
constexpr detail::Operation kCheckpoint{"ProcessCheckpoint::checkpoint"};
constexpr detail::Operation kRestore{"ProcessCheckpoint::restore"};
constexpr detail::Operation kUnlock{"ProcessCheckpoint::unlock"};

const detail::Operation& operation_of(CheckpointStep step) noexcept {
    switch (step) {
    case CheckpointStep::Lock: return kLock;
    case CheckpointStep::Checkpoint: return kCheckpoint;
    case CheckpointStep::Restore: return kRestore;
    case CheckpointStep::Unlock: return kUnlock;
    }
    return kLock;
}

// The four steps' entries: a driver without one of them cannot run the
// sequence, so none is called.
Result<void> require_sequence() {
    CUDYN_TRY(detail::require_entry(&DriverTable::cuCheckpointProcessGetState_v12080));
    CUDYN_TRY(detail::require_entry(&DriverTable::cuCheckpointProcessLock_v12080));
    CUDYN_TRY(detail::require_entry(&DriverTable::cuCheckpointProcessCheckpoint_v12080));
    CUDYN_TRY(detail::require_entry(&DriverTable::cuCheckpointProcessRestore_v12080));
    return detail::require_entry(&DriverTable::cuCheckpointProcessUnlock_v12080);
}

// The state each step starts from, in words.
const char* needed_by(CheckpointStep step) noexcept {
    if (step == CheckpointStep::Lock) return "running";
    return step == CheckpointStep::Restore ? "checkpointed" : "locked";
}
}  // namespace

const char* to_string(CheckpointStep step) noexcept {
    switch (step) {
    case CheckpointStep::Lock: return "lock";
    case CheckpointStep::Checkpoint: return "checkpoint";
    case CheckpointStep::Restore: return "restore";
    case CheckpointStep::Unlock: return "unlock";
    }
    return "unknown";
}

Result<ProcessCheckpoint> ProcessCheckpoint::lock(int pid, std::chrono::milliseconds timeout) {
    if (timeout.count() <= 0 || timeout.count() > static_cast<long long>(UINT_MAX))
        return kLock.invalid("timeout of " + std::to_string(timeout.count()) +
                             " ms: give a positive one under 2^32 ms, or none to wait without bound");
    return lock_with(pid, static_cast<unsigned>(timeout.count()));
}

Result<ProcessCheckpoint> ProcessCheckpoint::lock(int pid) { return lock_with(pid, 0); }

Result<ProcessCheckpoint> ProcessCheckpoint::lock_with(int pid, unsigned timeout_ms) {
    if (pid <= 0) return kLock.invalid("pid " + std::to_string(pid) + " is not a process id");
    if (static_cast<std::uint64_t>(pid) == detail::this_process().pid)
        return kLock.invalid("pid " + std::to_string(pid) +
                             " is this process: a process cannot lock itself (its own CUDA calls would block)");
    CUDYN_TRY(require_sequence());
    CUDYN_TRY_ASSIGN(const ProcessState now, process_state(pid));
    if (now != ProcessState::Running)
        return kLock.invalid("process " + std::to_string(pid) + " is " + to_string(now) +
                             "; lock needs it running (another controller may hold it)");
    CUcheckpointLockArgs args;
    std::memset(&args, 0, sizeof args);
    args.timeoutMs = timeout_ms;
    ProcessCheckpoint owner(pid);
    owner.state_ = ProcessState::Running;
    auto locked = call_driver(&DriverTable::cuCheckpointProcessLock_v12080, pid, &args);
    if (!locked) {
        Error error = owner.failed(CheckpointStep::Lock, std::move(locked).error());
        owner.pid_ = 0;  // nothing to undo: a lock that failed leaves the target running
        return error;
    }
    owner.state_ = ProcessState::Locked;
    return owner;
}

Result<void> ProcessCheckpoint::expect(ProcessState needed, CheckpointStep step) const {
    const detail::Operation& op = operation_of(step);
    if (pid_ == 0) return op.invalid("this ProcessCheckpoint holds no process (moved from)");
    if (state_ != needed)
        return op.invalid("process " + std::to_string(pid_) + " is " + to_string(state_) + "; " + to_string(step) +
                          " needs it " + needed_by(step));
    return ok();
}

Error ProcessCheckpoint::failed(CheckpointStep step, Error error) {
    CheckpointFailure failure;
    failure.step = step;
    failure.error = error;
    auto now = process_state(pid_);
    std::string left = "its state could not be read";
    if (now) {
        failure.state_after = *now;
        state_ = *now;
        left = std::string("it is left ") + to_string(*now);
    }
    failure_ = std::move(failure);
    error.message += (error.message.empty() ? "" : "; ") + std::string("process ") + std::to_string(pid_) + ": " + left;
    return operation_of(step).context(std::move(error));
}

Result<void> ProcessCheckpoint::checkpoint() {
    CUDYN_TRY(expect(ProcessState::Locked, CheckpointStep::Checkpoint));
    CUcheckpointCheckpointArgs args;
    std::memset(&args, 0, sizeof args);
    auto done = call_driver(&DriverTable::cuCheckpointProcessCheckpoint_v12080, pid_, &args);
    if (!done) return failed(CheckpointStep::Checkpoint, std::move(done).error());
    state_ = ProcessState::Checkpointed;
    return ok();
}

Result<void> ProcessCheckpoint::restore(const RestorePlacement& placement) {
    CUDYN_TRY(expect(ProcessState::Checkpointed, CheckpointStep::Restore));
    if (!placement.empty() && load_report().driver_version < 13000)
        return kRestore.not_supported("cuCheckpointProcessRestore",
                                      "restoring onto other devices needs a 13.0 driver (this one is " +
                                          std::to_string(load_report().driver_version) + ")");
    std::vector<CUcheckpointGpuPair> pairs(placement.moves().size());
    for (std::size_t i = 0; i < pairs.size(); ++i) {
        std::memcpy(pairs[i].oldUuid.bytes, placement.moves()[i].from.bytes.data(), sizeof pairs[i].oldUuid.bytes);
        std::memcpy(pairs[i].newUuid.bytes, placement.moves()[i].to.bytes.data(), sizeof pairs[i].newUuid.bytes);
    }
    CUcheckpointRestoreArgs args;
    std::memset(&args, 0, sizeof args);
    if (!pairs.empty()) {
        args.gpuPairs = pairs.data();
        args.gpuPairsCount = static_cast<unsigned>(pairs.size());
    }
    auto done = call_driver(&DriverTable::cuCheckpointProcessRestore_v12080, pid_, &args);
    if (!done) return failed(CheckpointStep::Restore, std::move(done).error());
    state_ = ProcessState::Locked;
    return ok();
}

Result<void> ProcessCheckpoint::unlock() {
    CUDYN_TRY(expect(ProcessState::Locked, CheckpointStep::Unlock));
    CUcheckpointUnlockArgs args;
    std::memset(&args, 0, sizeof args);
    auto done = call_driver(&DriverTable::cuCheckpointProcessUnlock_v12080, pid_, &args);
    if (!done) return failed(CheckpointStep::Unlock, std::move(done).error());
    state_ = ProcessState::Running;
    return ok();
}

Result<void> ProcessCheckpoint::finish() {
    if (pid_ == 0 || state_ == ProcessState::Running) return ok();
    if (state_ == ProcessState::Checkpointed) CUDYN_TRY(restore());
    return unlock();
}

ProcessCheckpoint::ProcessCheckpoint(ProcessCheckpoint&& other) noexcept
    : pid_(std::exchange(other.pid_, 0)), state_(other.state_), failure_(std::move(other.failure_)) {}

ProcessCheckpoint& ProcessCheckpoint::operator=(ProcessCheckpoint&& other) noexcept {
    if (this != &other) {
        let_go();
        pid_ = std::exchange(other.pid_, 0);
        state_ = other.state_;
        failure_ = std::move(other.failure_);
    }
    return *this;
}

ProcessCheckpoint::~ProcessCheckpoint() { let_go(); }

// The destructor's finish: a target must not stay locked because its
// controller went away, and where it cannot be brought back the reason is
// said, not swallowed.
void ProcessCheckpoint::let_go() noexcept {
    if (pid_ == 0 || state_ == ProcessState::Running) return;
    auto finished = finish();
    if (!finished)
        std::fprintf(stderr, "cudyn: ProcessCheckpoint: process %d could not be brought back to running: %s\n", pid_,
                     finished.error().describe().c_str());
    pid_ = 0;
}

}  // namespace cudyn
