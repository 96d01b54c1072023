// Checkpoint and restore on the real driver: a child holds device memory
// (256 MiB) and pool memory on GPU 0; this process locks, checkpoints,
// restores and unlocks it; the child checks every word and keeps working.
// On two GPUs a restore swaps GPU 0 and GPU 1 and the child finds itself on
// the other GPU. Needs a driver with the checkpoint entries (12.8+; onto
// other GPUs 13.0+) and no root.
//
// The target's side: a child imports a whole range and legacy IPC memory
// from this process, closes them with a CheckpointPreparation, is
// checkpointed, restored and unlocked, resumes them and checks every word:
// the range at its old address, the IPC memory wherever the driver opened it.
//
// Every case that checkpoints through the driver is also tagged
// [driver-checkpoint]: the driver refuses checkpoint under compute-sanitizer,
// so scripts/gpu_check.sh's sanitizer stage leaves them out
// (CUDYN_TEST_LEAVE_OUT, tests/support/test_main.cpp).
#include "support/catch.hpp"
#include "support/checkpoint_target.hpp"
#include "support/ipc_helpers.hpp"
#include "support/vmm_helpers.hpp"  // take, require_ok

#include "cudyn/checkpoint/checkpoint_blockers.hpp"
#include "cudyn/checkpoint/checkpoint_preparation.hpp"
#include "cudyn/checkpoint/process_checkpoint.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/share/imported_ipc_memory.hpp"
#include "cudyn/share/ipc_memory.hpp"
#include "cudyn/share/range_sharing.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/growable_buffer.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

using cudyn::ProcessCheckpoint;
using cudyn::ProcessState;
using namespace cudyn_test;
using namespace cudyn_test::ipc;

namespace {
std::string uuid_of(int ordinal) { return take(take(cudyn::Device::get(ordinal)).uuid()).to_string(); }

constexpr auto kGpuStep = std::chrono::seconds(60);
constexpr auto kGpuChildTimeout = std::chrono::seconds(120);
constexpr std::size_t kRangeBytes = std::size_t{32} << 20;
constexpr std::size_t kIpcWords = std::size_t{1} << 22;  // 16 MiB
constexpr std::uint32_t kRangeStamp = 0x7A46E5u;
constexpr std::uint32_t kIpcStamp = 0x1BC0FFEEu;
constexpr auto kPrepared = static_cast<Tag>(20);
constexpr auto kCheckpointDone = static_cast<Tag>(21);

// Every word of [address, address + bytes) read back to the host.
bool words_are(CUdeviceptr address, std::size_t bytes, std::uint32_t value) {
    std::vector<std::uint32_t> seen(bytes / 4);
    auto span = cudyn::DeviceSpan<std::uint32_t>(address, seen.size());
    if (!span.copy_to(cudyn::HostSpan<std::uint32_t>(seen))) return false;
    for (const std::uint32_t word : seen)
        if (word != value) return false;
    return true;
}

// The target: imports the range and the IPC memory, prepares, waits for
// the checkpoint, resumes, checks, answers kDone.
int checkpoint_importer_role(int, char**) {
    return run_role("gpu-checkpoint-importer", [](ChildChecks& check, cudyn::FdChannel& channel) {
        auto ipc_descriptor = receive_descriptor<cudyn::IpcMemoryDescriptor>(channel, kMemDescriptor, kGpuStep);
        auto layout = cudyn::receive_range(channel, kGpuStep);
        if (!ok(check, ipc_descriptor, "IPC descriptor") || !ok(check, layout, "range")) return;
        auto ipc = cudyn::import_ipc_memory(*ipc_descriptor);
        auto range = cudyn::import_range(std::move(*layout));
        if (!ok(check, ipc, "import IPC") || !ok(check, range, "import range")) return;
        check.expect(words_are(range->device_address(), range->size_bytes(), kRangeStamp), "range bytes before");
        check.expect(words_are(ipc->device_address(), ipc->size_bytes(), kIpcStamp), "IPC bytes before");
        cudyn::CheckpointPreparation preparation;
        ok(check, preparation.add(*range), "add the range");
        ok(check, preparation.add(*ipc, cudyn::AddressChange::Allowed), "add the IPC memory");
        if (!ok(check, preparation.prepare(), "prepare")) return;
        for (const auto& blocker : cudyn::checkpoint_blockers())
            check.expect(!blocker.blocks_driver, std::string("nothing blocks: ") + cudyn::to_string(blocker.import.kind));
        const CUdeviceptr range_address = range->device_address();
        ok(check, send_tag(channel, kPrepared), "tell the parent");
        if (!ok(check, channel.receive(kCheckpointDone, std::chrono::seconds(300)), "the parent's checkpoint")) return;
        if (!ok(check, preparation.resume(), "resume")) return;
        check.expect(range->device_address() == range_address, "the range at the same address");
        check.expect(words_are(range->device_address(), range->size_bytes(), kRangeStamp), "range bytes after");
        check.expect(words_are(ipc->device_address(), ipc->size_bytes(), kIpcStamp), "IPC bytes after");
        ok(check, send_tag(channel, kDone), "verdict");
    });
}
const cudyn_test::ChildRole checkpoint_importer("gpu-checkpoint-importer", checkpoint_importer_role);
}  // namespace

TEST_CASE("a child closes its imports before it is checkpointed and reopens them after, every word intact",
          "[gpu][checkpoint][driver-checkpoint]") {
    auto device = take(cudyn::Device::get(0));
    auto context = take(cudyn::PrimaryContext::activate(device));
    auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(kIpcWords));
    require_ok(buffer.fill(kIpcStamp));
    auto growable = take(cudyn::GrowableBuffer::create(
        cudyn::AllocationProperties::device(0).with_handle_types(cudyn::HandleType::PosixFileDescriptor),
        2 * kRangeBytes));
    require_ok(growable.grow_to(kRangeBytes));
    require_ok(take(growable.device_span_as<std::uint32_t>()).fill(kRangeStamp));

    ParentSide side = start_child("gpu-checkpoint-importer");
    require_ok(send_bytes(side.channel, kMemDescriptor, take(cudyn::export_ipc_memory(buffer)).to_bytes()));
    require_ok(cudyn::send_descriptor(side.channel, take(take(cudyn::RangeExporter::create(growable)).describe())));
    REQUIRE(side.channel.receive(kPrepared, kGpuStep).has_value());
    const int pid = static_cast<int>(side.child.pid());
    auto owner = take(ProcessCheckpoint::lock(pid, std::chrono::seconds(10)));
    require_ok(owner.checkpoint());
    CHECK(take(cudyn::process_state(pid)) == ProcessState::Checkpointed);
    require_ok(owner.restore());
    require_ok(owner.unlock());
    require_ok(send_tag(side.channel, kCheckpointDone));
    CHECK(side.channel.receive(kDone, std::chrono::seconds(120)).has_value());
    CHECK(side.child.wait(kGpuChildTimeout) == 0);
    // The exporter's bytes were never the target's to save: untouched.
    CHECK(words_are(growable.device_address(), kRangeBytes, kRangeStamp));
}

TEST_CASE("the real driver checkpoints a child holding device and pool memory and restores every byte",
          "[gpu][checkpoint][driver-checkpoint]") {
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
          "[gpu][checkpoint][driver-checkpoint]") {
    CheckpointTarget t(uuid_of(0), 64);
    {
        auto owner = take(ProcessCheckpoint::lock(t.pid()));
        require_ok(owner.checkpoint());
    }
    CHECK(take(cudyn::process_state(t.pid())) == ProcessState::Running);
    CHECK(t.verified());
}

TEST_CASE("a restore that swaps GPU 0 and GPU 1 puts the child on the other GPU, its bytes intact",
          "[gpu][multi-gpu][driver-checkpoint]") {
    CheckpointTarget t(uuid_of(1), 256);
    auto owner = take(ProcessCheckpoint::lock(t.pid(), std::chrono::seconds(10)));
    require_ok(owner.checkpoint());
    cudyn::RestorePlacement placement;
    require_ok(placement.swap(take(cudyn::Device::get(0)), take(cudyn::Device::get(1))));
    require_ok(owner.restore(placement));
    require_ok(owner.unlock());
    CHECK(t.verified());
}
