// gpu suite: sharing any allocation from its address on the real driver
// ([gpu][share-any]). For each kind (cuMemAlloc memory, VMM memory with a
// POSIX descriptor mapped inside a larger reservation, memory from a pool
// created shareable) the test fills the allocation, shares a part of it that
// starts inside it, and a second process (this binary started again: the
// driver does not survive fork()) opens it with import_allocation, without being
// told the kind, checks the exporter's bytes at the offset and writes a
// reply the exporter then reads back. Then the kinds that cannot be shared:
// NotSupported naming why, or InvalidArgument for what is not GPU memory, as
// the driver's pointer attributes on an H200 with driver 580 say
// (docs/measurements/h200-2026-11-25-batch-dmabuf-hostvmm-pointers.md).
#include "support/catch.hpp"
#include "support/child_process.hpp"
#include "support/ipc_helpers.hpp"
#include "support/share_any_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/memory/host_registration.hpp"
#include "cudyn/memory/managed_buffer.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/share/allocation_sharing.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

using cudyn::AccessFlags;
using cudyn::AllocationProperties;
using cudyn::ErrorCode;
using cudyn::HandleType;
using cudyn::Location;
using cudyn::AllocationKind;
using cudyn_test::ChildChecks;
using cudyn_test::require_error;
using cudyn_test::require_ok;
using cudyn_test::take;
using cudyn_test::share_any::Expected;
using namespace cudyn_test::ipc;

namespace {

// A child's CUDA start-up takes a good part of a second: generous bounds, never a hang.
constexpr auto kGpuStep = std::chrono::seconds(60);
constexpr auto kGpuChildTimeout = std::chrono::seconds(120);
constexpr std::size_t kMiB = std::size_t{1} << 20;

int consumer_role(int, char**) {
    return run_role("gpu-share-any-consumer", [](ChildChecks& check, cudyn::FdChannel& channel) {
        cudyn_test::share_any::consume(check, channel, kGpuStep);
    });
}
const cudyn_test::ChildRole consumer("gpu-share-any-consumer", consumer_role);

void share(CUdeviceptr base, CUdeviceptr part, std::size_t bytes, const Expected& expected) {
    cudyn_test::share_any::Exchange exchange("gpu-share-any-consumer");
    exchange.step = kGpuStep;
    exchange.child_timeout = kGpuChildTimeout;
    cudyn_test::share_any::share_with_consumer(base, part, bytes, expected, exchange);
}

cudyn::PrimaryContext context_on_device0() {
    return take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(0))));
}

}  // namespace

TEST_CASE("cuMemAlloc memory shared from an address 4 KiB inside it: a legacy handle, opened at the offset",
          "[gpu][share-any]") {
    auto context = context_on_device0();
    auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(kMiB / 4));
    share(buffer.device_address(), buffer.device_address() + 4096, 256 * 1024,
          Expected(AllocationKind::LegacyIpc, HandleType::None, kMiB));
}

TEST_CASE("VMM memory mapped at the second granule of a four-granule reservation: a POSIX descriptor of the "
          "mapping, opened at the offset",
          "[gpu][share-any]") {
    auto context = context_on_device0();
    const auto caps = take(cudyn::probe_capabilities(take(cudyn::Device::get(0))));
    INFO("device 0 reports no VMM or no POSIX-descriptor handles");
    REQUIRE((caps.virtual_memory_management && caps.posix_fd_handles));
    const auto props = AllocationProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor);
    const std::size_t granule = take(cudyn::allocation_granularity(props));
    auto range = take(cudyn::AddressRange::reserve(4 * granule));
    auto memory = take(cudyn::PhysicalMemory::create(props, 2 * granule));
    auto mapping = take(cudyn::MappedRange::map(range, granule, memory, {{Location::device(0), AccessFlags::ReadWrite}}));
    const CUdeviceptr base = mapping.device_address();
    share(base, base + granule + 4096, 1 << 20, Expected(AllocationKind::Vmm, HandleType::PosixFileDescriptor, 2 * granule));
}

TEST_CASE("memory from a pool created shareable, shared from an address inside the allocation, goes as the pool and the "
          "pointer, opened at the offset",
          "[gpu][share-any]") {
    auto context = context_on_device0();
    INFO("device 0 reports no memory pools");
    REQUIRE(take(cudyn::probe_capabilities(take(cudyn::Device::get(0)))).memory_pools);
    auto pool = take(cudyn::MemoryPool::create(
        cudyn::PoolProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor)));
    auto stream = take(cudyn::Stream::create());
    auto buffer = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, kMiB / 4, stream));
    require_ok(stream.synchronize());  // allocated before the other process uses it
    // The allocation's size as the driver gives it back is not what this test
    // pins: only that the part lies inside it.
    share(buffer.device_address(), buffer.device_address() + 4096, 64 * 1024,
          Expected(AllocationKind::Pool, HandleType::PosixFileDescriptor, kMiB, false));
    require_ok(buffer.free());  // after the other process freed its import
    require_ok(stream.synchronize());
}

TEST_CASE("what the real driver gives no inter-process handle is NotSupported naming why; what it does not know "
          "is InvalidArgument",
          "[gpu][share-any]") {
    auto context = context_on_device0();
    auto pinned = take(cudyn::PinnedBuffer<std::uint32_t>::allocate(1024));
    require_error(cudyn::export_allocation(reinterpret_cast<std::uintptr_t>(pinned.data()) + 64, 64),
                  ErrorCode::NotSupported, "host memory");
    std::vector<std::uint32_t> host(4096);
    auto registration = take(cudyn::HostRegistration::register_memory(host.data(), host.size() * 4));
    require_error(cudyn::export_allocation(reinterpret_cast<std::uintptr_t>(host.data()) + 4096, 64),
                  ErrorCode::NotSupported, "host memory");
    auto managed = take(cudyn::ManagedBuffer<std::uint32_t>::allocate(1024));
    require_error(cudyn::export_allocation(managed.device_address() + 64, 64), ErrorCode::NotSupported,
                  "managed memory");
    std::vector<std::uint32_t> plain(1024);
    require_error(cudyn::export_allocation(reinterpret_cast<std::uintptr_t>(plain.data()) + 64, 64),
                  ErrorCode::InvalidArgument, "not GPU memory");

    const auto props = AllocationProperties::device(0);
    const std::size_t granule = take(cudyn::allocation_granularity(props));
    auto range = take(cudyn::AddressRange::reserve(4 * granule));
    auto memory = take(cudyn::PhysicalMemory::create(props, granule));
    auto mapping = take(cudyn::MappedRange::map(range, granule, memory, {{Location::device(0), AccessFlags::ReadWrite}}));
    require_error(cudyn::export_allocation(mapping.device_address() + 4096, 64), ErrorCode::NotSupported,
                  "without a shareable handle type");
    require_error(cudyn::export_allocation(range.device_address() + 64, 64), ErrorCode::InvalidArgument,
                  "not GPU memory");

    auto stream = take(cudyn::Stream::create());
    auto from_default = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(1024, stream));
    require_ok(stream.synchronize());
    require_error(cudyn::export_allocation(from_default.device_address(), 64), ErrorCode::NotSupported,
                  "pool created without a shareable handle type");
    require_ok(from_default.free());
    require_ok(stream.synchronize());
}
