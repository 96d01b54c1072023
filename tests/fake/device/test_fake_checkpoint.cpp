// Checkpoint and restore of another process against the fakes: a child holds
// device memory with known bytes while this process locks, checkpoints,
// restores (in place and onto the other device) and unlocks it; the child
// then checks every byte and which device it is on. Wrong-state steps,
// placements and drivers without the entries are refused before the driver;
// a failed restore keeps the driver's answer and the state it left.
#include "support/catch.hpp"
#include "support/checkpoint_target.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"  // take, require_ok

#include "cudyn/checkpoint/process_checkpoint.hpp"
#include "cudyn/device/device.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

using cudyn::ErrorCode;
using cudyn::ProcessCheckpoint;
using cudyn::ProcessState;
using cudyn::RestorePlacement;
using namespace cudyn_test;

namespace {

std::string uuid_of(int ordinal) { return take(take(cudyn::Device::get(ordinal)).uuid()).to_string(); }

}  // namespace

TEST_CASE("a controller checkpoints a child and restores it in place; every byte comes back",
          "[emulated][cuda12][checkpoint]") {
    auto context = activate(0);
    CheckpointTarget t(uuid_of(0));
    CHECK(take(cudyn::process_state(t.pid())) == ProcessState::Running);
    auto owner = take(ProcessCheckpoint::lock(t.pid(), std::chrono::seconds(5)));
    CHECK(owner.state() == ProcessState::Locked);
    CHECK(take(cudyn::process_state(t.pid())) == ProcessState::Locked);
    require_ok(owner.checkpoint());
    CHECK(take(cudyn::process_state(t.pid())) == ProcessState::Checkpointed);
    CHECK(take(cudyn::restore_thread_id(t.pid())) > 0);
    require_ok(owner.restore());
    CHECK(take(cudyn::process_state(t.pid())) == ProcessState::Locked);
    require_ok(owner.unlock());
    CHECK(take(cudyn::process_state(t.pid())) == ProcessState::Running);
    CHECK(!owner.failure().has_value());
    CHECK(t.verified());
}

TEST_CASE("each step refuses a target in the wrong state, naming the state, before the driver",
          "[emulated][checkpoint]") {
    auto context = activate(0);
    CheckpointTarget t(uuid_of(0));
    require_error(ProcessCheckpoint::lock(0), ErrorCode::InvalidArgument, "not a process id");
    require_error(ProcessCheckpoint::lock(static_cast<int>(::getpid())), ErrorCode::InvalidArgument, "this process");
    require_error(ProcessCheckpoint::lock(t.pid(), std::chrono::milliseconds(0)), ErrorCode::InvalidArgument,
                  "timeout");
    auto owner = take(ProcessCheckpoint::lock(t.pid(), std::chrono::seconds(5)));
    require_error(ProcessCheckpoint::lock(t.pid()), ErrorCode::InvalidArgument, "is locked");
    require_error(owner.restore(), ErrorCode::InvalidArgument, "is locked; restore needs it checkpointed");
    require_ok(owner.checkpoint());
    require_error(owner.checkpoint(), ErrorCode::InvalidArgument, "is checkpointed; checkpoint needs it locked");
    require_error(owner.unlock(), ErrorCode::InvalidArgument, "is checkpointed; unlock needs it locked");
    CHECK(take(cudyn::process_state(t.pid())) == ProcessState::Checkpointed);
    require_ok(owner.finish());
    CHECK(owner.state() == ProcessState::Running);
    CHECK(t.verified());
}

TEST_CASE("an owner let go while the target is checkpointed restores and unlocks it", "[emulated][checkpoint]") {
    auto context = activate(0);
    CheckpointTarget t(uuid_of(0));
    {
        auto owner = take(ProcessCheckpoint::lock(t.pid()));
        require_ok(owner.checkpoint());
        ProcessCheckpoint moved = std::move(owner);
        CHECK(moved.pid() == t.pid());
    }
    CHECK(take(cudyn::process_state(t.pid())) == ProcessState::Running);
    CHECK(t.verified());
}

TEST_CASE("a restore onto the other device: the child's device 0 is the other GPU, its bytes intact",
          "[emulated][checkpoint]") {
    auto context = activate(0);
    const std::string first = uuid_of(0), second = uuid_of(1);
    CheckpointTarget t(second);
    auto owner = take(ProcessCheckpoint::lock(t.pid(), std::chrono::seconds(5)));
    require_ok(owner.checkpoint());
    RestorePlacement placement;
    require_ok(placement.swap(take(cudyn::Device::get(0)), take(cudyn::Device::get(1))));
    REQUIRE(placement.moves().size() == 2);
    require_ok(owner.restore(placement));
    require_ok(owner.unlock());
    CHECK(t.verified());
    CHECK(uuid_of(0) == first);  // the controller's own devices did not move
}

TEST_CASE("a placement refuses a device moved twice, two onto one, and devices that are not there",
          "[emulated][checkpoint]") {
    auto zero = take(cudyn::Device::get(0));
    auto one = take(cudyn::Device::get(1));
    RestorePlacement placement;
    require_ok(placement.move(zero, one));
    require_error(placement.move(zero, zero), ErrorCode::InvalidArgument, "already moved onto");
    require_error(placement.move(one, one), ErrorCode::InvalidArgument, "already moved onto");
    require_error(placement.swap(zero, zero), ErrorCode::InvalidArgument, "both devices");
    auto nowhere = take(cudyn::DeviceUuid::parse("GPU-00000000-0000-4000-8000-0000000000ff"));
    require_error(placement.move(take(one.uuid()), nowhere), ErrorCode::InvalidArgument, "no visible device");
    require_error(placement.move(cudyn::DeviceUuid{}, take(zero.uuid())), ErrorCode::InvalidArgument, "zero UUID");
    CHECK(placement.moves().size() == 1);
}

TEST_CASE("a 12.8 driver checkpoints but cannot restore onto other devices", "[cuda12][checkpoint]") {
    auto context = activate(0);
    CheckpointTarget t(uuid_of(0));
    auto owner = take(ProcessCheckpoint::lock(t.pid(), std::chrono::seconds(5)));
    require_ok(owner.checkpoint());
    RestorePlacement placement;
    require_ok(placement.swap(take(cudyn::Device::get(0)), take(cudyn::Device::get(1))));
    require_error(owner.restore(placement), ErrorCode::NotSupported, "13.0 driver");
    CHECK(owner.state() == ProcessState::Checkpointed);
    require_ok(owner.finish());
    CHECK(t.verified());
}

TEST_CASE("a restore the driver refuses names the step and leaves the target checkpointed",
          "[emulated][checkpoint]") {
    auto context = activate(0);
    REQUIRE(::setenv("FAKECUDA_CHECKPOINT_FAIL", "restore", 1) == 0);
    CheckpointTarget t(uuid_of(0));
    ::unsetenv("FAKECUDA_CHECKPOINT_FAIL");
    auto owner = take(ProcessCheckpoint::lock(t.pid(), std::chrono::seconds(5)));
    require_ok(owner.checkpoint());
    require_error(owner.restore(), ErrorCode::Driver, "left checkpointed");
    REQUIRE(owner.failure().has_value());
    CHECK(owner.failure()->step == cudyn::CheckpointStep::Restore);
    CHECK(owner.failure()->error.driver_result == CUDA_ERROR_UNKNOWN);
    CHECK(owner.failure()->state_after == ProcessState::Checkpointed);
    CHECK(owner.state() == ProcessState::Checkpointed);
    require_error(owner.finish(), ErrorCode::Driver, "cuCheckpointProcessRestore");
    // The child stays locked: its ChildProcess kills it.
}

TEST_CASE("a driver without the checkpoint entries answers NotSupported before any call",
          "[cuda11][legacy][checkpoint]") {
    require_error(cudyn::process_state(1), ErrorCode::NotSupported, "cuCheckpointProcessGetState");
    require_error(cudyn::restore_thread_id(1), ErrorCode::NotSupported, "cuCheckpointProcessGetRestoreThreadId");
    require_error(ProcessCheckpoint::lock(1, std::chrono::seconds(1)), ErrorCode::NotSupported,
                  "cuCheckpointProcessGetState");
}

TEST_CASE("each step the driver refuses names the step and the state; the owner then brings the target back",
          "[emulated][checkpoint]") {
    auto context = activate(0);
    struct Step {
        const char* entry;
        cudyn::CheckpointStep step;
        ProcessState left;
    };
    const Step steps[] = {
        {"cuCheckpointProcessCheckpoint:1:CUDA_ERROR_UNKNOWN", cudyn::CheckpointStep::Checkpoint, ProcessState::Locked},
        {"cuCheckpointProcessRestore:1:CUDA_ERROR_UNKNOWN", cudyn::CheckpointStep::Restore, ProcessState::Checkpointed},
        {"cuCheckpointProcessUnlock:1:CUDA_ERROR_UNKNOWN", cudyn::CheckpointStep::Unlock, ProcessState::Locked},
    };
    for (const Step& s : steps) {
        INFO(s.entry);
        CheckpointTarget t(uuid_of(0));
        {
            auto owner = take(ProcessCheckpoint::lock(t.pid(), std::chrono::seconds(5)));
            cudyn::Result<void> refused = cudyn::ok();
            {
                const ScopedFault fault(s.entry);
                refused = owner.checkpoint();
                if (refused) refused = owner.restore();
                if (refused) refused = owner.unlock();
            }
            require_error(refused, ErrorCode::Driver, std::string("left ") + cudyn::to_string(s.left));
            REQUIRE(owner.failure().has_value());
            CHECK(owner.failure()->step == s.step);
            CHECK(owner.failure()->state_after == s.left);
            CHECK(owner.state() == s.left);
        }  // the owner restores and unlocks what is left
        CHECK(take(cudyn::process_state(t.pid())) == ProcessState::Running);
        CHECK(t.verified());
    }
    {
        CheckpointTarget t(uuid_of(0));
        const ScopedFault fault("cuCheckpointProcessLock:1:CUDA_ERROR_UNKNOWN");
        require_error(ProcessCheckpoint::lock(t.pid()), ErrorCode::Driver, "left running");
        CHECK(take(cudyn::process_state(t.pid())) == ProcessState::Running);
    }
}
