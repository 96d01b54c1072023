// Checkpoint and restore on the real driver: a child holds device memory
// (256 MiB) and pool memory on GPU 0; this process locks, checkpoints,
// restores and unlocks it; the child checks every word and keeps working.
// On two GPUs a restore swaps GPU 0 and GPU 1 and the child finds itself on
// the other GPU. Needs a driver with the checkpoint entries (12.8+; onto
// other GPUs 13.0+) and no root.
#include "support/catch.hpp"
#include "support/checkpoint_target.hpp"
#include "support/vmm_helpers.hpp"  // take, require_ok

#include "cudyn/checkpoint/process_checkpoint.hpp"

#include <chrono>
#include <string>

using cudyn::ProcessCheckpoint;
using cudyn::ProcessState;
using namespace cudyn_test;

namespace {
std::string uuid_of(int ordinal) { return take(take(cudyn::Device::get(ordinal)).uuid()).to_string(); }
}  // namespace

TEST_CASE("the real driver checkpoints a child holding device and pool memory and restores every byte",
          "[gpu][checkpoint]") {
    CheckpointTarget t(uuid_of(0), 256);
    CHECK(take(cudyn::process_state(t.pid())) == ProcessState::Running);
    auto owner = take(ProcessCheckpoint::lock(t.pid(), std::chrono::seconds(10)));
    CHECK(take(cudyn::process_state(t.pid())) == ProcessState::Locked);
    require_ok(owner.checkpoint());
    CHECK(take(cudyn::process_state(t.pid())) == ProcessState::Checkpointed);
    CHECK(take(cudyn::restore_thread_id(t.pid())) > 0);
    require_ok(owner.restore());
    require_ok(owner.unlock());
    CHECK(take(cudyn::process_state(t.pid())) == ProcessState::Running);
    CHECK(t.verified());
}

TEST_CASE("an owner let go while the target is checkpointed leaves it running, its bytes intact",
          "[gpu][checkpoint]") {
    CheckpointTarget t(uuid_of(0), 64);
    {
        auto owner = take(ProcessCheckpoint::lock(t.pid()));
        require_ok(owner.checkpoint());
    }
    CHECK(take(cudyn::process_state(t.pid())) == ProcessState::Running);
    CHECK(t.verified());
}

TEST_CASE("a restore that swaps GPU 0 and GPU 1 puts the child on the other GPU, its bytes intact",
          "[gpu][multi-gpu]") {
    CheckpointTarget t(uuid_of(1), 256);
    auto owner = take(ProcessCheckpoint::lock(t.pid(), std::chrono::seconds(10)));
    require_ok(owner.checkpoint());
    cudyn::RestorePlacement placement;
    require_ok(placement.swap(take(cudyn::Device::get(0)), take(cudyn::Device::get(1))));
    require_ok(owner.restore(placement));
    require_ok(owner.unlock());
    CHECK(t.verified());
}
