// cudyn — what went wrong in a checkpoint sequence: the step, the driver's
// answer, and the state the target was left in.
#pragma once

#include "cudyn/checkpoint/process_state.hpp"
#include "cudyn/core/error.hpp"

#include <optional>

namespace cudyn {

enum class CheckpointStep { Lock, Checkpoint, Restore, Unlock };

// "lock", "checkpoint", "restore", "unlock".
const char* to_string(CheckpointStep step) noexcept;

struct CheckpointFailure {
    CheckpointStep step = CheckpointStep::Lock;
    Error error;  // the driver's answer to the step
    // The target's state read after the failure; empty when that read failed too.
    std::optional<ProcessState> state_after;
};

}  // namespace cudyn
