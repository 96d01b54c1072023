// VMM memory on host locations (AllocationProperties::host(), host_numa(n))
// on the fake drivers: mapped for a device and for the host, so the host
// dereferences the mapped address and a device copy sees the same bytes; a
// GrowableBuffer of it; the driver's rules as an H200 with driver 580 showed
// them (docs/measurements/h200-2026-11-25-batch-dmabuf-hostvmm-pointers.md).
// The host attributes are CUDA 12's: the cuda11 fake reads 0 and says
// NotSupported; legacy (10.1) has no VMM at all.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/vmm/growable_buffer.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/memory/memory_info.hpp"
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

using cudyn::AccessFlags;
using cudyn::AllocationProperties;
using cudyn::ErrorCode;
using cudyn::GrowableBuffer;
using cudyn::HandleType;
using cudyn::Location;
using cudyn::MappedRange;
using cudyn::PhysicalMemory;
using cudyn_test::activate;
using cudyn_test::DriverSnapshot;
using cudyn_test::kMiB;
using cudyn_test::read_device;
using cudyn_test::require_error;
using cudyn_test::require_ok;
using cudyn_test::ScopedAttribute;
using cudyn_test::take;

namespace {

const AccessFlags kRW = AccessFlags::ReadWrite;

std::uint32_t* words_at(void* host) { return static_cast<std::uint32_t*>(host); }

// The words the host writes at word i of a buffer: distinct across chunks.
std::uint32_t pattern(std::size_t i) { return 0xC0DE0000u ^ static_cast<std::uint32_t>(i * 2654435761u); }

// True when words [first, end) hold pattern(i), every `step`-th word checked.
template <typename Words>
bool holds_pattern(const Words& words, std::size_t first, std::size_t end, std::size_t step = 1) {
    for (std::size_t i = first; i < end; i += step)
        if (words[i] != pattern(i)) return false;
    return true;
}

}  // namespace

TEST_CASE("host and host NUMA memory mapped for a device and the host", "[emulated][host-vmm]") {
    auto context = activate(0);
    const DriverSnapshot before;
    for (const auto& props : {AllocationProperties::host(), AllocationProperties::host_numa(1)}) {
        INFO(props.describe());
        CHECK(take(cudyn::allocation_granularity(props)) == 2 * kMiB);
        CHECK(take(cudyn::allocation_granularity(props, cudyn::Granularity::Recommended)) == 2 * kMiB);
        auto range = take(cudyn::AddressRange::reserve(4 * kMiB));
        auto memory = take(PhysicalMemory::create(props, 4 * kMiB));
        auto mapping = take(MappedRange::map(range, 0, memory, {{Location::device(0), kRW}, {props.location(), kRW}}));
        REQUIRE(mapping.host_address() != nullptr);
        CHECK(mapping.host_address() == reinterpret_cast<void*>(static_cast<std::uintptr_t>(mapping.device_address())));
        CHECK(take(mapping.access(props.location())) == kRW);

        // The host writes, the device reads; the device writes, the host reads.
        const std::size_t words = 4 * kMiB / 4;
        for (std::size_t i = 0; i < words; i += 1024) words_at(mapping.host_address())[i] = pattern(i);
        CHECK(holds_pattern(read_device(mapping.device_address(), words), 0, words, 1024));
        cudyn_test::fill32(mapping.device_address() + 2 * kMiB, 2 * kMiB, 0xFEEDu);
        CHECK(words_at(mapping.host_address())[words / 2] == 0xFEEDu);
        CHECK(words_at(mapping.host_address())[words - 1] == 0xFEEDu);

        // The driver reads it as host memory (pointer type HOST, as measured).
        CHECK(take(cudyn::pointer_attributes(mapping.device_address() + 4096)).memory_type ==
              cudyn::MemoryType::Host);
        // Plain host memory is placed on a node: its properties read back as host NUMA node 0.
        CUmemAllocationProp got{};
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemGetAllocationPropertiesFromHandle_v10020, &got,
                                      memory.handle()));
        CHECK(got.location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA);
        CHECK(got.location.id == (props.location().kind() == cudyn::LocationKind::Host ? 0 : 1));

        // Access taken from the host again: no host address any more.
        require_ok(mapping.set_access(props.location(), AccessFlags::None));
        CHECK(mapping.host_address() == nullptr);
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("host VMM memory without a host grant, and device memory, have no host address", "[emulated][host-vmm]") {
    auto context = activate(0);
    auto range = take(cudyn::AddressRange::reserve(4 * kMiB));
    auto host = take(PhysicalMemory::create(AllocationProperties::host_numa(0), 2 * kMiB));
    auto device = take(PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB));
    auto device_only = take(MappedRange::map(range, 0, host, {{Location::device(0), kRW}}));
    auto on_device = take(MappedRange::map(range, 2 * kMiB, device, {{Location::device(0), kRW}}));
    CHECK(device_only.host_address() == nullptr);
    CHECK(on_device.host_address() == nullptr);
    require_ok(device_only.set_access(Location::host_numa(0), AccessFlags::Read));
    CHECK(device_only.host_address() != nullptr);
    CHECK(MappedRange().host_address() == nullptr);
}

TEST_CASE("host NUMA memory with a POSIX handle exports and imports; plain host memory takes none",
          "[emulated][host-vmm]") {
    auto context = activate(0);
    const DriverSnapshot before({"cuMemCreate"});
    // The driver refuses handle types on plain host memory: cudyn before it.
    require_error(PhysicalMemory::create(AllocationProperties::host().with_handle_types(HandleType::PosixFileDescriptor),
                                         2 * kMiB),
                  ErrorCode::InvalidArgument, "use a host NUMA node");
    CHECK(before.calls_since("cuMemCreate") == 0);
    {
        const auto props = AllocationProperties::host_numa(0).with_handle_types(HandleType::PosixFileDescriptor);
        auto memory = take(PhysicalMemory::create(props, 2 * kMiB));
        auto imported = take(cudyn::import_memory_fd(take(cudyn::export_memory_fd(memory))));
        REQUIRE(imported.properties() != nullptr);
        CHECK(imported.properties()->location() == Location::host_numa(0));
        auto range = take(cudyn::AddressRange::reserve(4 * kMiB));
        const std::vector<cudyn::AccessGrant> grants{{Location::device(0), kRW}, {Location::host_numa(0), kRW}};
        auto first = take(MappedRange::map(range, 0, memory, grants));
        auto second = take(MappedRange::map(range, 2 * kMiB, imported, grants));
        words_at(first.host_address())[7] = 0xA11CEu;
        CHECK(words_at(second.host_address())[7] == 0xA11CEu);  // one allocation, two mappings
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("host VMM: the driver's refusals and the attributes that gate it", "[emulated][host-vmm]") {
    auto context = activate(0);
    const DriverSnapshot before({"cuMemCreate", "cuMemGetAllocationGranularity"});
    // HOST_NUMA_CURRENT: cuMemCreate takes no such location.
    require_error(PhysicalMemory::create(AllocationProperties(Location::host_numa_current()), 2 * kMiB),
                  ErrorCode::InvalidArgument, "host NUMA current");
    CHECK(before.calls_since("cuMemCreate") == 0);
    // A node this machine lacks (FAKECUDA_NUMA_NODES=2): the granularity query
    // still answers, the creation is the driver's refusal.
    CHECK(take(cudyn::allocation_granularity(AllocationProperties::host_numa(5))) == 2 * kMiB);
    auto missing = PhysicalMemory::create(AllocationProperties::host_numa(5), 2 * kMiB);
    require_error(missing, ErrorCode::Driver, "is host NUMA node 5 a node of this machine?");
    CHECK(missing.error().driver_result == CUDA_ERROR_INVALID_VALUE);
    {
        const ScopedAttribute off(0, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0);
        require_error(PhysicalMemory::create(AllocationProperties::host(), 2 * kMiB), ErrorCode::NotSupported,
                      "HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0 on device 0");
        require_error(GrowableBuffer::create(AllocationProperties::host(), 8 * kMiB), ErrorCode::NotSupported,
                      "HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED");
        take(PhysicalMemory::create(AllocationProperties::host_numa(0), 2 * kMiB));  // the other attribute
    }
    {
        const ScopedAttribute off(0, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0);
        require_error(PhysicalMemory::create(AllocationProperties::host_numa(0), 2 * kMiB), ErrorCode::NotSupported,
                      "HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0 on device 0");
    }
    CHECK(before.live_delta() == 0);

    // The fake's raw answers, as measured: the granularity query is lenient
    // where cuMemCreate refuses.
    const cudyn::DriverTable& cu = cudyn::driver();
    std::size_t granularity = 0;
    CUmemGenericAllocationHandle handle = 0;
    CUmemAllocationProp host_fd = AllocationProperties::host().to_cu();
    host_fd.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CHECK(cu.cuMemGetAllocationGranularity_v10020(&granularity, &host_fd, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
          CUDA_SUCCESS);
    CHECK(granularity == 2 * kMiB);
    CHECK(cu.cuMemCreate_v10020(&handle, 2 * kMiB, &host_fd, 0) == CUDA_ERROR_INVALID_VALUE);
    CUmemAllocationProp current = AllocationProperties::host_numa(0).to_cu();
    current.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
    CHECK(cu.cuMemGetAllocationGranularity_v10020(&granularity, &current, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) ==
          CUDA_SUCCESS);
    CHECK(cu.cuMemCreate_v10020(&handle, 2 * kMiB, &current, 0) == CUDA_ERROR_INVALID_VALUE);
    const CUmemAllocationProp no_node = AllocationProperties::host_numa(99).to_cu();
    CHECK(cu.cuMemGetAllocationGranularity_v10020(&granularity, &no_node, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
          CUDA_SUCCESS);
    CHECK(cu.cuMemCreate_v10020(&handle, 2 * kMiB, &no_node, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK(before.live_delta() == 0);
}

TEST_CASE("GrowableBuffer on host memory: grow, shrink, sleep and wake, the host reading across chunks",
          "[emulated][host-vmm]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        // Default grants: the current context's device and the memory's host location.
        auto buffer = take(GrowableBuffer::create(AllocationProperties::host_numa(1), 16 * kMiB, {2 * kMiB, {}}));
        CHECK(buffer.host_address() == nullptr);  // nothing mapped yet
        require_ok(buffer.grow_to(5 * kMiB));
        REQUIRE(buffer.host_address() != nullptr);
        const CUdeviceptr base = buffer.device_address();
        CHECK(buffer.host_address() == reinterpret_cast<void*>(static_cast<std::uintptr_t>(base)));

        // The host writes every word of three chunks; a device copy reads them.
        std::uint32_t* words = words_at(buffer.host_address());
        const std::size_t first_words = buffer.size_bytes() / 4;
        for (std::size_t i = 0; i < first_words; ++i) words[i] = pattern(i);
        CHECK(holds_pattern(read_device(base, first_words), 0, first_words));

        // Growing keeps the bytes and the address; the host writes the new chunks too.
        require_ok(buffer.grow_to(12 * kMiB));
        CHECK(buffer.device_address() == base);
        CHECK(buffer.host_address() == words);
        const std::size_t all_words = buffer.size_bytes() / 4;
        CHECK(holds_pattern(words, 0, first_words));
        for (std::size_t i = first_words; i < all_words; ++i) words[i] = pattern(i);
        CHECK(holds_pattern(read_device(base, all_words), 0, all_words));
        cudyn_test::fill32(base + 10 * kMiB, 2 * kMiB, 0xD0D0u);  // a device write into the last chunk
        CHECK(words[all_words - 1] == 0xD0D0u);

        // Shrinking keeps what stays; sleep and wake bring the bytes back at the same address.
        require_ok(buffer.shrink_to(4 * kMiB));
        CHECK(buffer.size_bytes() == 4 * kMiB);
        require_ok(buffer.release_physical(GrowableBuffer::Contents::Save));
        CHECK(buffer.host_address() == nullptr);
        require_ok(buffer.restore());
        REQUIRE(buffer.host_address() == words);
        CHECK(holds_pattern(words, 0, 4 * kMiB / 4));

        // Explicit grants without the host: kernels only.
        auto device_only = take(GrowableBuffer::create(AllocationProperties::host(), 4 * kMiB,
                                                       {0, {{Location::device(0), kRW}}}));
        require_ok(device_only.grow_to(2 * kMiB));
        CHECK(device_only.host_address() == nullptr);
        CHECK(device_only.device_address() != 0);
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("host VMM is NotSupported where the driver's attributes are older than CUDA 12", "[cuda11][host-vmm]") {
    auto context = activate(0);
    require_error(PhysicalMemory::create(AllocationProperties::host(), 2 * kMiB), ErrorCode::NotSupported,
                  "HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED");
    require_error(GrowableBuffer::create(AllocationProperties::host_numa(0), 8 * kMiB), ErrorCode::NotSupported,
                  "HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED");
}

TEST_CASE("legacy driver: host VMM is NotSupported, naming the entry", "[legacy][host-vmm]") {
    auto context = activate(0);
    require_error(PhysicalMemory::create(AllocationProperties::host_numa(0), 2 * kMiB), ErrorCode::NotSupported,
                  "does not provide cuMemGetAllocationGranularity");
}
