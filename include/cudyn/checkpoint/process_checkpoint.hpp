// cudyn — checkpointing another process and bringing it back: one owner for
// the driver's lock -> checkpoint -> restore -> unlock sequence.
//
//     CUDYN_TRY_ASSIGN(auto target, cudyn::ProcessCheckpoint::lock(pid, std::chrono::seconds(5)));
//     CUDYN_TRY(target.checkpoint());   // its device memory is now in host memory
//     ...                                // the device is free for other work
//     CUDYN_TRY(target.restore());      // or restore(placement): onto other devices
//     CUDYN_TRY(target.unlock());       // it runs again
//
// Each step checks first that the target is in the state the step needs
// and refuses with InvalidArgument naming the state it is in. A step the
// driver refuses keeps the driver's answer in failure(), with the state the
// target was left in. An owner destroyed before the target runs again
// restores it (where checkpointed) and unlocks it, so no failure in the
// controller leaves a process silently locked; when that cannot be done it
// says why on stderr. finish() does the same with the answer returned.
#pragma once

#include "cudyn/checkpoint/checkpoint_failure.hpp"
#include "cudyn/checkpoint/process_state.hpp"
#include "cudyn/checkpoint/restore_placement.hpp"
#include "cudyn/core/result.hpp"

#include <chrono>
#include <optional>

namespace cudyn {

class ProcessCheckpoint {
public:
    // Locks process `pid` (another process; a program cannot checkpoint
    // itself): its CUDA calls block once those running now return. Waits at
    // most `timeout` (positive, under 50 days), after which the target is
    // left running and the answer is the driver's refusal; without a
    // timeout it waits as long as the target takes. InvalidArgument, before
    // any driver call, for a bad pid or timeout and for a target that is not
    // running; NotSupported where the driver lacks the checkpoint entries.
    static Result<ProcessCheckpoint> lock(int pid, std::chrono::milliseconds timeout);
    static Result<ProcessCheckpoint> lock(int pid);

    // Locked -> checkpointed: the target's device memory goes to host memory
    // and the device's is given back.
    Result<void> checkpoint();
    // Checkpointed -> locked, onto the devices `placement` names (13.0
    // drivers; NotSupported before). A refused restore leaves the target
    // checkpointed: restore again, or let the owner go to try once more.
    Result<void> restore(const RestorePlacement& placement = {});
    // Locked -> running.
    Result<void> unlock();
    // Whatever brings the target back to running from here: restore where
    // checkpointed, then unlock. Done (state running) on success.
    Result<void> finish();

    int pid() const noexcept { return pid_; }
    // The state the owner last left the target in (Running once finished).
    ProcessState state() const noexcept { return state_; }
    // The last step the driver refused, if any.
    const std::optional<CheckpointFailure>& failure() const noexcept { return failure_; }

    ProcessCheckpoint(ProcessCheckpoint&& other) noexcept;
    ProcessCheckpoint& operator=(ProcessCheckpoint&& other) noexcept;
    ProcessCheckpoint(const ProcessCheckpoint&) = delete;
    ProcessCheckpoint& operator=(const ProcessCheckpoint&) = delete;
    ~ProcessCheckpoint();

private:
    explicit ProcessCheckpoint(int pid) noexcept : pid_(pid) {}
    static Result<ProcessCheckpoint> lock_with(int pid, unsigned timeout_ms);
    Result<void> expect(ProcessState needed, CheckpointStep step) const;
    Error failed(CheckpointStep step, Error error);
    void let_go() noexcept;

    int pid_ = 0;  // 0: moved from, or never locked
    ProcessState state_ = ProcessState::Locked;
    std::optional<CheckpointFailure> failure_;
};

}  // namespace cudyn
