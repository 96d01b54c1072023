// cudyn — where another process stands in the driver's checkpoint sequence
// (running, locked, checkpointed, failed), and the thread its restore runs on.
#pragma once

#include "cudyn/core/result.hpp"

namespace cudyn {

enum class ProcessState {
    Running,       // its CUDA calls run
    Locked,        // its CUDA calls block; its device memory is still on the device
    Checkpointed,  // its device memory is in host memory and the device's is given back
    Failed,        // the driver could not finish a checkpoint or restore: the process cannot go on
};

// "running", "locked", "checkpointed", "failed".
const char* to_string(ProcessState state) noexcept;

// The state of process `pid` (cuCheckpointProcessGetState). InvalidArgument
// for a pid that is not positive; the driver's refusal for a process that
// does not use CUDA.
Result<ProcessState> process_state(int pid);

// The thread of process `pid` that runs its restore
// (cuCheckpointProcessGetRestoreThreadId): a checkpointing tool that freezes
// the process's threads must leave this one running until the restore ends.
Result<int> restore_thread_id(int pid);

}  // namespace cudyn
