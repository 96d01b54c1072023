// gpu suite: VMM memory on host locations on the real driver ([gpu][host-vmm]):
// mapped for device 0 and for the host, the host dereferences the mapped
// address while a PTX kernel (tests/support/ptx_kernels.hpp) reads and writes
// the same bytes; a GrowableBuffer of host NUMA memory across grows, a shrink
// and a release/restore; the driver's rules the fake models
// (docs/measurements/h200-2026-11-25-batch-dmabuf-hostvmm-pointers.md).
#include "support/catch.hpp"
#include "support/ptx_kernels.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/vmm/growable_buffer.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/memory/memory_info.hpp"
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

using cudyn::AccessFlags;
using cudyn::AllocationProperties;
using cudyn::ErrorCode;
using cudyn::GrowableBuffer;
using cudyn::HandleType;
using cudyn::Location;
using cudyn_test::kMiB;
using cudyn_test::PtxKernels;
using cudyn_test::require_ok;
using cudyn_test::take;

namespace {

void synchronize() { require_ok(cudyn::call_driver(&cudyn::DriverTable::cuCtxSynchronize_v2000)); }

// The host NUMA node closest to device 0 (0 where the system reports none).
int near_node() {
    const int node = take(take(cudyn::Device::get(0)).attribute(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID));
    return node < 0 ? 0 : node;
}

// Device 0's host VMM capabilities, required: the H200 reports both.
cudyn::DeviceCapabilities require_host_vmm() {
    const auto caps = take(cudyn::probe_capabilities(take(cudyn::Device::get(0))));
    INFO("device 0 lacks HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED or HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED");
    REQUIRE(caps.host_virtual_memory_management);
    REQUIRE(caps.host_numa_virtual_memory_management);
    return caps;
}

std::uint32_t* words_at(void* host) { return static_cast<std::uint32_t*>(host); }

// True when `count` words from `host` are `value`.
bool host_all_equal(const void* host, std::size_t count, std::uint32_t value) {
    const auto* words = static_cast<const std::uint32_t*>(host);
    for (std::size_t i = 0; i < count; ++i)
        if (words[i] != value) return false;
    return true;
}

}  // namespace

TEST_CASE("host VMM memory: the host dereferences what a kernel writes, and the other way round",
          "[gpu][host-vmm]") {
    require_host_vmm();
    auto context = take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(0))));
    const auto kernels = take(PtxKernels::load());
    const int node = near_node();
    for (const auto& props : {AllocationProperties::host(), AllocationProperties::host_numa(node)}) {
        INFO(props.describe());
        const std::size_t granule = take(cudyn::allocation_granularity(props));
        CHECK(granule == 2 * kMiB);  // measured on an H200
        const std::size_t bytes = 2 * granule;
        const std::size_t words = bytes / 4;
        auto range = take(cudyn::AddressRange::reserve(bytes));
        auto memory = take(cudyn::PhysicalMemory::create(props, bytes));
        auto mapping = take(cudyn::MappedRange::map(
            range, 0, memory, {{Location::device(0), AccessFlags::ReadWrite}, {props.location(), AccessFlags::ReadWrite}}));
        REQUIRE(mapping.host_address() != nullptr);
        std::uint32_t* host = words_at(mapping.host_address());

        // Host stores, a kernel adds, the host loads.
        for (std::size_t i = 0; i < words; ++i) host[i] = 40u;
        require_ok(kernels.add_u32(mapping.device_address(), words, 2u));
        synchronize();
        CHECK(host_all_equal(host, words, 42u));
        // A kernel fills, the host reads; a host store is what a device copy reads.
        require_ok(kernels.fill_u32(mapping.device_address(), words, 0x5EEDu));
        synchronize();
        CHECK(host_all_equal(host, words, 0x5EEDu));
        host[words - 1] = 7u;
        CHECK(cudyn_test::read32(mapping.device_address() + bytes - 4, 4)[0] == 7u);

        CHECK(take(cudyn::pointer_attributes(mapping.device_address() + 4096)).memory_type == cudyn::MemoryType::Host);
        CUmemAllocationProp got{};
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemGetAllocationPropertiesFromHandle_v10020, &got,
                                      memory.handle()));
        CHECK(got.location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA);  // plain HOST reads back as a node too
    }
}

TEST_CASE("host VMM memory: the driver's rules", "[gpu][host-vmm]") {
    require_host_vmm();
    auto context = take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(0))));
    const int node = near_node();
    // Handle types on plain host memory: refused before the driver.
    auto shareable_host = cudyn::PhysicalMemory::create(
        AllocationProperties::host().with_handle_types(HandleType::PosixFileDescriptor), 2 * kMiB);
    REQUIRE_FALSE(shareable_host.has_value());
    CHECK(shareable_host.error().code == ErrorCode::InvalidArgument);
    // A node that is not one: the granularity answers, the creation is refused.
    const auto missing = AllocationProperties::host_numa(99);
    CHECK(take(cudyn::allocation_granularity(missing)) == 2 * kMiB);
    auto refused = cudyn::PhysicalMemory::create(missing, 2 * kMiB);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().driver_result == CUDA_ERROR_INVALID_VALUE);
    // Host NUMA memory with a POSIX handle exports, imports and maps.
    const auto props = AllocationProperties::host_numa(node).with_handle_types(HandleType::PosixFileDescriptor);
    auto memory = take(cudyn::PhysicalMemory::create(props, 2 * kMiB));
    auto imported = take(cudyn::import_memory_fd(take(cudyn::export_memory_fd(memory))));
    auto range = take(cudyn::AddressRange::reserve(4 * kMiB));
    const std::vector<cudyn::AccessGrant> grants{{Location::device(0), AccessFlags::ReadWrite},
                                                 {Location::host_numa(node), AccessFlags::ReadWrite}};
    auto first = take(cudyn::MappedRange::map(range, 0, memory, grants));
    auto second = take(cudyn::MappedRange::map(range, 2 * kMiB, imported, grants));
    cudyn_test::fill32(first.device_address(), 2 * kMiB, 0xB0B0u);
    REQUIRE(second.host_address() != nullptr);
    CHECK(host_all_equal(second.host_address(), 2 * kMiB / 4, 0xB0B0u));
}

TEST_CASE("GrowableBuffer of host NUMA memory: kernels and the host across grows, a shrink and a release/restore",
          "[gpu][host-vmm]") {
    require_host_vmm();
    auto context = take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(0))));
    const auto kernels = take(PtxKernels::load());
    // Default grants: device 0 (current) and the node, read-write.
    auto buffer = take(GrowableBuffer::create(AllocationProperties::host_numa(near_node()), std::size_t{1} << 30));
    const std::size_t chunk = buffer.chunk_size_bytes();
    require_ok(buffer.grow_to(3 * chunk));
    REQUIRE(buffer.host_address() != nullptr);
    std::uint32_t* host = words_at(buffer.host_address());
    const CUdeviceptr base = buffer.device_address();
    const std::size_t small = buffer.size_bytes();
    for (std::size_t i = 0; i < small / 4; ++i) host[i] = 0xA0u;

    require_ok(buffer.grow_to(8 * chunk));
    CHECK(buffer.device_address() == base);
    CHECK(buffer.host_address() == host);
    const std::size_t large = buffer.size_bytes();
    for (std::size_t i = small / 4; i < large / 4; ++i) host[i] = 0xB0u;
    require_ok(kernels.add_u32(base, large / 4, 1u));  // one kernel over every chunk
    synchronize();
    CHECK(host_all_equal(host, small / 4, 0xA1u));
    CHECK(host_all_equal(host + small / 4, (large - small) / 4, 0xB1u));

    require_ok(buffer.shrink_to(small));
    CHECK(buffer.size_bytes() == small);
    require_ok(buffer.release_physical(GrowableBuffer::Contents::Save));
    CHECK(buffer.host_address() == nullptr);
    require_ok(buffer.restore());
    REQUIRE(buffer.host_address() == host);
    CHECK(host_all_equal(host, small / 4, 0xA1u));
    require_ok(kernels.add_u32(base, small / 4, 1u));
    synchronize();
    CHECK(host_all_equal(host, small / 4, 0xA2u));
}
