// cudyn — the checkpoint state of a process and its restore thread.
#include "cudyn/checkpoint/process_state.hpp"

#include "cudyn/loader/driver_call.hpp"
#include "core/internal.hpp"

#include <string>

namespace cudyn {

const char* to_string(ProcessState state) noexcept {
    switch (state) {
    case ProcessState::Running: return "running";
    case ProcessState::Locked: return "locked";
    case ProcessState::Checkpointed: return "checkpointed";
    case ProcessState::Failed: return "failed";
    }
    return "unknown";
}

Result<ProcessState> process_state(int pid) {
    constexpr detail::Operation kState{"process_state"};
    if (pid <= 0) return kState.invalid("pid " + std::to_string(pid) + " is not a process id");
    CUprocessState raw = CU_PROCESS_STATE_RUNNING;
    auto asked = call_driver(&DriverTable::cuCheckpointProcessGetState_v12080, pid, &raw);
    if (!asked) return kState.context(std::move(asked).error());
    switch (raw) {
    case CU_PROCESS_STATE_RUNNING: return ProcessState::Running;
    case CU_PROCESS_STATE_LOCKED: return ProcessState::Locked;
    case CU_PROCESS_STATE_CHECKPOINTED: return ProcessState::Checkpointed;
    default: return ProcessState::Failed;
    }
}

Result<int> restore_thread_id(int pid) {
    constexpr detail::Operation kThread{"restore_thread_id"};
    if (pid <= 0) return kThread.invalid("pid " + std::to_string(pid) + " is not a process id");
    int tid = 0;
    auto asked = call_driver(&DriverTable::cuCheckpointProcessGetRestoreThreadId_v12080, pid, &tid);
    if (!asked) return kThread.context(std::move(asked).error());
    return tid;
}

}  // namespace cudyn
