// NCCL on two GPUs, one process each (the test runs itself again as rank 1,
// on device 1): the shared rank scenario (registered DeviceBuffer, pool
// memory, a registered GrowableBuffer growing between collectives, the weight
// broadcast after growth), NCCL-ready VMM properties, and symmetric windows
// where the NCCL has them. Skipped (exit 77) below two devices; fails when
// NCCL cannot be found (CUDYN_NCCL_PATH or the wheel).
#include "support/catch.hpp"
#include "support/child_process.hpp"
#include "support/ipc_helpers.hpp"
#include "support/nccl_rank_scenario.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/device/primary_context.hpp"
#include "cudyn/nccl/nccl_channel.hpp"
#include "cudyn/nccl/nccl_library.hpp"

#include <chrono>
#include <cstdio>

namespace {

using cudyn_test::require_ok;
using cudyn_test::take;

cudyn::PrimaryContext activate(int ordinal) {
    auto device = take(cudyn::Device::get(ordinal));
    return take(cudyn::PrimaryContext::activate(device));
}

// Symmetric windows over NCCL-ready memory, every rank in step; the number of failed checks.
int window_scenario(cudyn::NcclCommunicator& comm) {
    if (cudyn::nccl_report().version < 22700) return 0;  // NotSupported there, checked in the fake suite
    auto buffer = cudyn::create_nccl_growable_buffer(comm.rank(), std::size_t{64} << 20);
    if (!buffer) return 1;
    const std::size_t chunk = buffer->chunk_size_bytes();
    auto windows = cudyn::NcclRegisteredGrowableBuffer::create(comm, std::move(*buffer),
                                                               cudyn::NcclRegistrationKind::SymmetricWindow);
    if (!windows || !windows->grow_to(2 * chunk)) {
        std::fprintf(stderr, "rank %d: windows: %s\n", comm.rank(),
                     windows ? "grow refused" : windows.error().describe().c_str());
        return 1;
    }
    auto floats = windows->buffer().device_span_as<float>();
    if (!floats || !floats->fill(1.5f) || !comm.all_reduce<float>(*floats, *floats, cudyn::NcclReduction::Sum))
        return 1;
    std::vector<float> sums(floats->size());
    if (!floats->copy_to(cudyn::HostSpan<float>(sums))) return 1;
    return sums.front() == 3.0f && sums.back() == 3.0f ? 0 : 1;
}

int gpu_peer_rank_role(int, char**) {
    const auto outcome = cudyn_test::run_peer_rank(std::chrono::seconds(60), [](cudyn::NcclCommunicator& comm) {
        return cudyn_test::nccl_rank_scenario(comm) + window_scenario(comm);
    });
    if (outcome.setup_failure != 0) return outcome.setup_failure;
    return outcome.failed_checks == 0 ? 0 : 1;
}
const cudyn_test::ChildRole gpu_peer_rank("nccl-gpu-peer-rank", gpu_peer_rank_role);

}  // namespace

TEST_CASE("NCCL on two GPUs: registered memory that grows between collectives", "[gpu][nccl]") {
    const cudyn::NcclReport& report = cudyn::nccl_report();
    INFO(report.message);
    REQUIRE(report.state == cudyn::NcclState::Loaded);
    std::printf("NCCL %d from %s\n", report.version, report.library_path.c_str());
    auto context = activate(0);
    const auto properties = take(cudyn::nccl_allocation_properties(0));
    std::printf("NCCL-ready memory: %s\n", properties.describe().c_str());
    CHECK(cudyn::includes(properties.handle_types(), cudyn::HandleType::PosixFileDescriptor));
    auto peer = cudyn_test::ipc::start_child("nccl-gpu-peer-rank");
    {
        auto comm = take(cudyn::nccl_communicator_as_root({&peer.channel}));
        CHECK(comm.rank_count() == 2);
        CHECK(cudyn_test::nccl_rank_scenario(comm) == 0);
        CHECK(window_scenario(comm) == 0);
    }
    CHECK(peer.child.wait(std::chrono::seconds(120)) == 0);
}
