// Checkpoint and restore of another process against the fakes: a child holds
// device memory with known bytes while this process locks, checkpoints,
// restores (in place and onto the other device) and unlocks it; the child
// then checks every byte and which device it is on. Wrong-state steps,
// placements and drivers without the entries are refused before the driver;
// a failed restore keeps the driver's answer and the state it left.
#include "support/catch.hpp"
#include "support/child_process.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"  // take, require_ok

#include "cudyn/checkpoint/process_checkpoint.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/memory/device_buffer.hpp"

#include <sys/socket.h>
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

constexpr std::size_t kWords = 1 << 18;  // 1 MiB

bool send_byte(int fd, char byte) { return ::send(fd, &byte, 1, MSG_NOSIGNAL) == 1; }
char receive_byte(int fd) {
    char byte = 0;
    return ::recv(fd, &byte, 1, MSG_WAITALL) == 1 ? byte : '\0';
}

// The target: 1 MiB of known words on device 0; 'r' once they are there,
// then on 'v' it reads them back and checks that device 0 is the device
// named by its argument (its UUID).
int target_role(int argc, char** argv) {
    ChildChecks check("checkpoint-target");
    const int channel = kChildChannelFd;
    auto device = cudyn::Device::get(0);
    auto context = device ? cudyn::PrimaryContext::activate(*device) : cudyn::Result<cudyn::PrimaryContext>(device.error());
    auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords);
    if (!check.expect(context.has_value() && buffer.has_value(), "device memory")) return check.exit_status();
    const std::vector<std::uint32_t> expected = iota_vector(kWords, 0x5eed0000u);
    check.expect(buffer->copy_from(cudyn::HostSpan<const std::uint32_t>(expected)).has_value(), "copy in");
    send_byte(channel, 'r');
    if (!check.expect(receive_byte(channel) == 'v', "the controller's go")) return check.exit_status();
    std::vector<std::uint32_t> seen(kWords);
    check.expect(buffer->copy_to(cudyn::HostSpan<std::uint32_t>(seen)).has_value(), "copy out");
    check.expect(seen == expected, "every byte came back");
    auto uuid = device->uuid();
    check.expect(uuid && argc > 0 && uuid->to_string() == argv[0],
                 "device 0 is " + (uuid ? uuid->to_string() : std::string("?")));
    send_byte(channel, check.exit_status() == 0 ? 'k' : 'x');
    return check.exit_status();
}
const ChildRole target("checkpoint-target", target_role);

std::string uuid_of(int ordinal) { return take(take(cudyn::Device::get(ordinal)).uuid()).to_string(); }

// A socket pair in `ends`; the child's end.
int connected(int (&ends)[2]) {
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, ends) == 0);
    return ends[1];
}

// A target child started and holding its memory; the channel's other end.
struct Target {
    int ends[2] = {-1, -1};
    ChildProcess child;

    explicit Target(const std::string& device0_after)
        : child(ChildProcess::spawn("checkpoint-target", {device0_after}, connected(ends))) {
        ::close(ends[1]);
        REQUIRE(child.pid() > 0);
        REQUIRE(receive_byte(ends[0]) == 'r');
    }
    Target(const Target&) = delete;
    Target& operator=(const Target&) = delete;
    int pid() const { return static_cast<int>(child.pid()); }
    // Lets the child check its bytes; its verdict.
    bool verified() {
        if (!send_byte(ends[0], 'v')) return false;
        const bool good = receive_byte(ends[0]) == 'k';
        return child.wait(std::chrono::seconds(20)) == 0 && good;
    }
    ~Target() { ::close(ends[0]); }
};

}  // namespace

TEST_CASE("a controller checkpoints a child and restores it in place; every byte comes back",
          "[emulated][cuda12][checkpoint]") {
    auto context = activate(0);
    Target t(uuid_of(0));
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
    Target t(uuid_of(0));
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
    Target t(uuid_of(0));
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
    Target t(second);
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
    Target t(uuid_of(0));
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
    Target t(uuid_of(0));
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
