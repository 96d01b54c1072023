// gpu suite: a whole growable range shared with a second process on the real
// driver ([gpu][range-share], and [gpu][ipc-multi-gpu] with the consumer on
// GPU 1). The producer's GrowableBuffer grows three times, a kernel writing
// each new part; after each growth one update carries only the new chunks.
// The consumer (this binary started again: the driver does not survive
// fork()) imported the range once, applies every update at the same base
// address, and a kernel sums the whole mapped range to check every byte.
// Then the producer shrinks without telling the consumer yet: the consumer
// still reads the dropped chunks' bytes (the driver keeps physical memory
// while a process maps it) until it applies the update that drops them.
// Last, the producer releases and restores its memory with new bytes: the
// update replaces every chunk.
#include "support/catch.hpp"
#include "support/child_process.hpp"
#include "support/ipc_helpers.hpp"
#include "support/ptx_kernels.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/share/range_sharing.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/growable_buffer.hpp"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using cudyn::AccessFlags;
using cudyn::AllocationProperties;
using cudyn::HandleType;
using cudyn::Location;
using cudyn_test::ChildChecks;
using cudyn_test::require_ok;
using cudyn_test::take;
using namespace cudyn_test::ipc;

namespace {

constexpr auto kGpuStep = std::chrono::seconds(60);
constexpr auto kGpuChildTimeout = std::chrono::seconds(120);
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kPart = 8 * kMiB;  // what each growth adds
constexpr std::size_t kCapacity = 4 * kPart;

// What every word of `part` holds; `salt` changes once the producer's
// memory was released and restored, so stale chunks would show.
std::uint32_t word_of(std::size_t part, std::uint64_t salt) {
    return 0x51000000u + static_cast<std::uint32_t>(salt << 8) + static_cast<std::uint32_t>(part);
}

// The sum (mod 2^32) of `parts` parts, each all its own word.
std::uint32_t expected_sum(std::size_t parts, std::uint64_t salt) {
    std::uint32_t sum = 0;
    for (std::size_t part = 0; part < parts; ++part)
        sum += static_cast<std::uint32_t>(kPart / 4) * word_of(part, salt);
    return sum;
}

// The consumer: argv = {device ordinal}. Imports the range, then for each
// message of u64 "parts mapped, apply first?, salt" checks the mapped bytes with a
// kernel, applying the update first when told to, and answers kDone.
int consumer_role(int, char** argv) {
    const int ordinal = std::atoi(argv[0]);
    return run_role(
        "gpu-range-consumer",
        [ordinal](ChildChecks& check, cudyn::FdChannel& channel) {
            auto kernels = cudyn_test::PtxKernels::load();
            if (!ok(check, kernels, "load the kernels")) return;
            auto sum = cudyn::DeviceBuffer<std::uint32_t>::allocate(1);
            if (!ok(check, sum, "the sum's buffer")) return;
            auto layout = cudyn::receive_range(channel, kGpuStep);
            if (!ok(check, layout, "receive the layout")) return;
            auto imported =
                cudyn::import_range(std::move(*layout), {{Location::device(ordinal), AccessFlags::ReadWrite}});
            if (!ok(check, imported, "import_range on device " + std::to_string(ordinal))) return;
            const CUdeviceptr base = imported->device_address();
            for (;;) {
                auto step = channel.receive(kRawBytes, kGpuStep);
                if (!step && step.error().code == cudyn::ErrorCode::Io) break;  // the producer is done
                if (!ok(check, step, "the next step")) return;
                std::uint64_t order[3] = {0, 0, 0};  // parts, apply an update first, salt
                std::memcpy(order, step->payload.data(), sizeof order);
                if (order[1] != 0) {
                    auto update = cudyn::receive_range(channel, kGpuStep);
                    if (!ok(check, update, "receive an update")) return;
                    if (!ok(check, imported->apply(std::move(*update)), "apply")) return;
                }
                check.expect(imported->device_address() == base, "the base address never moves");
                const std::size_t bytes = static_cast<std::size_t>(order[0]) * kPart;
                check.expect(imported->size_bytes() >= bytes, "the parts are mapped");
                if (!ok(check, sum->device_span().fill(0), "zero the sum")) return;
                if (!ok(check, kernels->sum_u32(base, bytes / 4, sum->device_address()), "sum kernel")) return;
                if (!ok(check, cudyn::call_driver(&cudyn::DriverTable::cuCtxSynchronize_v2000), "synchronize"))
                    return;
                std::uint32_t got = 0;
                if (!ok(check, sum->device_span().copy_to(cudyn::HostSpan<std::uint32_t>(&got, 1)), "read the sum"))
                    return;
                const std::uint32_t expected = expected_sum(static_cast<std::size_t>(order[0]), order[2]);
                check.expect(got == expected, "the kernel's sum of " + std::to_string(order[0]) + " parts is " +
                                                  std::to_string(got) + ", expected " + std::to_string(expected));
                ok(check, send_tag(channel, kDone, kGpuStep), "send 'done'");
            }
            ok(check, imported->close(), "close the import");
        },
        ordinal);
}
const cudyn_test::ChildRole consumer("gpu-range-consumer", consumer_role);

void tell(ParentSide& side, std::uint64_t parts, bool update_follows, std::uint64_t salt = 0) {
    const std::uint64_t order[3] = {parts, update_follows ? 1u : 0u, salt};
    require_ok(side.channel.send(kRawBytes, order, sizeof order, -1, kGpuStep));
}

void produce(int consumer_device) {
    auto context = take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(0))));
    const auto caps = take(cudyn::probe_capabilities(take(cudyn::Device::get(0))));
    INFO("device 0 reports no VMM or no POSIX-descriptor handles");
    REQUIRE((caps.virtual_memory_management && caps.posix_fd_handles));
    auto kernels = take(cudyn_test::PtxKernels::load());
    auto buffer = take(cudyn::GrowableBuffer::create(
        AllocationProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor), kCapacity));
    require_ok(buffer.grow_to(kPart));
    require_ok(kernels.fill_u32(buffer.device_address(), kPart / 4, word_of(0, 0)));
    require_ok(cudyn::call_driver(&cudyn::DriverTable::cuCtxSynchronize_v2000));
    auto exporter = take(cudyn::RangeExporter::create(buffer));
    ParentSide side = start_child("gpu-range-consumer", {std::to_string(consumer_device)});
    require_ok(cudyn::send_descriptor(side.channel, take(exporter.describe()), kGpuStep));
    tell(side, 1, false);
    (void)take(side.channel.receive(kDone, kGpuStep));

    for (std::size_t parts = 2; parts <= 4; ++parts) {
        const std::size_t had = buffer.chunk_count();
        require_ok(buffer.grow_to(parts * kPart));
        require_ok(kernels.fill_u32(buffer.device_address() + (parts - 1) * kPart, kPart / 4, word_of(parts - 1, 0)));
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuCtxSynchronize_v2000));
        auto update = take(exporter.update());
        CHECK(update.kept_chunks == had);
        CHECK(update.listed_bytes() == kPart);
        tell(side, parts, true);
        require_ok(cudyn::send_descriptor(side.channel, update, kGpuStep));
        (void)take(side.channel.receive(kDone, kGpuStep));
    }

    // Shrunk to one part, the consumer not told yet: it still reads all four.
    require_ok(buffer.shrink_to(kPart));
    tell(side, 4, false);
    (void)take(side.channel.receive(kDone, kGpuStep));
    auto shrink = take(exporter.update());
    CHECK(shrink.chunks.empty());
    tell(side, 1, true);
    require_ok(cudyn::send_descriptor(side.channel, shrink, kGpuStep));
    (void)take(side.channel.receive(kDone, kGpuStep));

    // Released and restored: new physical memory at the same addresses, new
    // bytes. The update must replace every chunk (the exporter tells them by
    // the driver's handle), or the consumer would still read the old ones.
    require_ok(buffer.release_physical());
    require_ok(buffer.restore());
    require_ok(kernels.fill_u32(buffer.device_address(), kPart / 4, word_of(0, 1)));
    require_ok(cudyn::call_driver(&cudyn::DriverTable::cuCtxSynchronize_v2000));
    auto restored = take(exporter.update());
    CHECK(restored.kept_chunks == 0);
    tell(side, 1, true, 1);
    require_ok(cudyn::send_descriptor(side.channel, restored, kGpuStep));
    (void)take(side.channel.receive(kDone, kGpuStep));

    require_ok(side.channel.close());
    CHECK(side.child.wait(kGpuChildTimeout) == 0);
}

}  // namespace

TEST_CASE("a GrowableBuffer grown three times is followed by another process; a kernel checks every byte",
          "[gpu][range-share]") {
    produce(0);
}

TEST_CASE("a GrowableBuffer on GPU 0 followed by a process whose context is on GPU 1", "[gpu][ipc-multi-gpu]") {
    produce(1);
}
