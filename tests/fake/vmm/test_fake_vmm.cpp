// Virtual memory management (AddressRange, PhysicalMemory, MappedRange,
// access, granularity) on the fake drivers: the emulated and cuda11 variants
// back it with real host virtual memory, so data, sharing and faults are real;
// legacy (CUDA 10.1) has no VMM entries at all.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/vmm/memory_access.hpp"
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/vmm/range_access.hpp"

#include "device/device_facts.hpp"  // forget_capabilities: the fake's attributes change, a driver's do not
#include "vmm/internal.hpp"           // forget_granularity_answers: a fault injected into the query must reach it

#include <signal.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using cudyn::AccessFlags;
using cudyn::AddressRange;
using cudyn::AllocationProperties;
using cudyn::ErrorCode;
using cudyn::HandleType;
using cudyn::Location;
using cudyn::MappedRange;
using cudyn::PhysicalMemory;
using cudyn_test::activate;
using cudyn_test::DriverSnapshot;
using cudyn_test::FakeDriver;
using cudyn_test::kMiB;
using cudyn_test::require_error;
using cudyn_test::require_ok;
using cudyn_test::ScopedAttribute;
using cudyn_test::ScopedFault;
using cudyn_test::ScopedImexChannel;
using cudyn_test::take;

namespace {

const AccessFlags kRW = AccessFlags::ReadWrite;

void set_peer_access(int accessor, int owner, int can) {
    auto function = reinterpret_cast<PFN_fakecuda_set_peer_access>(FakeDriver::loaded().symbol("fakecuda_set_peer_access"));
    REQUIRE(function != nullptr);
    function(accessor, owner, can);
}

}  // namespace

TEST_CASE("the granularity is asked once per property set; a refused answer fails the create and is not kept",
          "[emulated][cuda11][vmm]") {
    auto context = activate(0);
    const auto props = AllocationProperties::device(1).with_handle_types(HandleType::PosixFileDescriptor);
    cudyn::detail::forget_granularity_answers();  // as in a fresh process
    const DriverSnapshot before;
    {
        ScopedFault fault("cuMemGetAllocationGranularity");
        require_error(PhysicalMemory::create(props, 2 * kMiB), ErrorCode::OutOfMemory,
                      "cuMemGetAllocationGranularity");
    }
    CHECK(before.live_delta() == 0);
    const DriverSnapshot first({"cuMemGetAllocationGranularity"});
    auto memory = take(PhysicalMemory::create(props, 2 * kMiB));  // asked again: the refusal was not kept
    CHECK(first.calls_since("cuMemGetAllocationGranularity") == 1);
    const DriverSnapshot later({"cuMemGetAllocationGranularity"});
    auto again = take(PhysicalMemory::create(props, 2 * kMiB));
    CHECK(take(cudyn::allocation_granularity(props)) == 2 * kMiB);
    CHECK(later.calls_since("cuMemGetAllocationGranularity") == 0);
    CHECK(take(cudyn::allocation_granularity(props, cudyn::Granularity::Recommended)) == 2 * kMiB);
    CHECK(later.calls_since("cuMemGetAllocationGranularity") == 1);  // another kind of answer: asked once
    // A size that is no multiple is still refused before the driver, from the kept answer.
    const DriverSnapshot refused({"cuMemCreate", "cuMemGetAllocationGranularity"});
    require_error(PhysicalMemory::create(props, 3 * kMiB), ErrorCode::InvalidArgument,
                  "not a multiple of the allocation granularity");
    refused.require_untouched();
}

TEST_CASE("granularity is asked for the exact allocation properties", "[emulated][cuda11][vmm]") {
    const auto props = AllocationProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor);
    const CUmemAllocationProp prop = props.to_cu();
    CHECK(prop.type == CU_MEM_ALLOCATION_TYPE_PINNED);
    CHECK(prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE);
    CHECK(prop.location.id == 0);
    CHECK(prop.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CHECK(prop.allocFlags.gpuDirectRDMACapable == 0);
    CHECK(AllocationProperties::device(1).to_cu().location.id == 1);
    CHECK(cudyn::to_string(HandleType::PosixFileDescriptor | HandleType::Fabric) == "posix_fd|fabric");
    CHECK(cudyn::to_string(HandleType::None) == "none");

    CHECK(take(cudyn::allocation_granularity(props)) == 2 * kMiB);
    CHECK(take(cudyn::allocation_granularity(props, cudyn::Granularity::Recommended)) == 2 * kMiB);
    CHECK(take(cudyn::allocation_granularity(AllocationProperties::device(1))) == 2 * kMiB);

    // Host NUMA VMM is a CUDA 12 attribute: the cuda11 fake reports 0.
    auto numa = cudyn::allocation_granularity(AllocationProperties::host_numa(1));
    if (FakeDriver::loaded().variant() == "emulated") {
        CHECK(take(std::move(numa)) == 2 * kMiB);
    } else {
        require_error(numa, ErrorCode::NotSupported, "HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED");
    }
}

TEST_CASE("creation and granularity checks read no device attribute after the first", "[emulated][cuda11][vmm]") {
    auto context = activate(0);
    const auto device0 = AllocationProperties::device(0);
    const auto fd1 = AllocationProperties::device(1).with_handle_types(HandleType::PosixFileDescriptor);
    // The first use of each device may read its attributes (or an earlier test did).
    take(PhysicalMemory::create(device0, 2 * kMiB));
    take(cudyn::allocation_granularity(fd1));
    const auto device1 = take(cudyn::Device::get(1));
    const DriverSnapshot before({"cuDeviceGetAttribute", "cuDeviceGetCount", "cuDeviceGet", "cuMemCreate"});
    for (int i = 0; i < 3; ++i) {
        take(PhysicalMemory::create(device0, 2 * kMiB));
        take(PhysicalMemory::create(fd1, 2 * kMiB));
        CHECK(take(cudyn::allocation_granularity(device0)) == 2 * kMiB);
        CHECK(take(cudyn::allocation_granularity(fd1, cudyn::Granularity::Recommended)) == 2 * kMiB);
        require_ok(device0.check_supported());
        CHECK(take(cudyn::probe_capabilities(device1)).posix_fd_handles);
        // A "no" is answered from memory too.
        require_error(PhysicalMemory::create(device0.with_gpu_direct_rdma(), 2 * kMiB), ErrorCode::NotSupported,
                      "GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED is 0");
    }
    CHECK(before.calls_since("cuDeviceGetAttribute") == 0);
    CHECK(before.calls_since("cuDeviceGetCount") == 0);
    CHECK(before.calls_since("cuDeviceGet") == 0);
    CHECK(before.calls_since("cuMemCreate") == 6);
    CHECK(before.live_delta() == 0);
}

TEST_CASE("a failed capability read under PhysicalMemory::create is not kept", "[emulated][cuda11][vmm]") {
    auto context = activate(0);
    const auto props = AllocationProperties::device(0);
    cudyn::detail::forget_capabilities();
    {
        const ScopedFault fault("cuDeviceGetAttribute:2+:CUDA_ERROR_OUT_OF_MEMORY");
        require_error(PhysicalMemory::create(props, 2 * kMiB), ErrorCode::OutOfMemory, "cuDeviceGetAttribute");
        require_error(cudyn::allocation_granularity(props), ErrorCode::OutOfMemory, "cuDeviceGetAttribute");
    }
    // Asked again after the failure, then stored: the second create reads nothing.
    const DriverSnapshot first({"cuDeviceGetAttribute"});
    take(PhysicalMemory::create(props, 2 * kMiB));
    CHECK(first.calls_since("cuDeviceGetAttribute") == static_cast<long>(cudyn::device_capability_count));
    const DriverSnapshot second({"cuDeviceGetAttribute"});
    take(PhysicalMemory::create(props, 2 * kMiB));
    CHECK(second.calls_since("cuDeviceGetAttribute") == 0);
}

TEST_CASE("two mappings of one physical allocation see the same bytes", "[emulated][cuda11][vmm]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        auto range = take(AddressRange::reserve(8 * kMiB));
        auto memory = take(PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB));
        CHECK(memory.size_bytes() == 2 * kMiB);
        CHECK(memory.granularity() == 2 * kMiB);
        CHECK(memory.handle() != 0);
        auto first = take(MappedRange::map(range, 0, memory, {{Location::device(0), kRW}}));
        auto second = take(MappedRange::map(range, 4 * kMiB, memory, {{Location::device(0), kRW}}));
        CHECK(first.device_address() == range.device_address());
        CHECK(second.device_address() == range.device_address() + 4 * kMiB);
        CHECK(second.offset_bytes() == 4 * kMiB);
        CHECK(range.mapping_count() == 2);

        cudyn_test::fill32(first.device_address(), 2 * kMiB, 0xC0FFEEu);
        CHECK(cudyn_test::all_equal(second.device_address(), 2 * kMiB, 0xC0FFEEu));
        cudyn_test::fill32(second.device_address() + kMiB, 4, 7u);
        CHECK(cudyn_test::read32(first.device_address() + kMiB, 4)[0] == 7u);
        // The fake's device memory is host memory: the host sees the bytes too.
        std::uint32_t word = 0;
        std::memcpy(&word, reinterpret_cast<const void*>(first.device_address()), sizeof word);
        CHECK(word == 0xC0FFEEu);

        // The mappings as DeviceSpans: a copy from one lands in the other's bytes.
        auto first_words = take(first.device_span_as<std::uint32_t>());
        auto second_words = take(second.device_span_as<std::uint32_t>());
        CHECK(first_words.device_address() == first.device_address());
        CHECK(first_words.size() == 2 * kMiB / 4);
        require_ok(first_words.fill(5u));
        CHECK(cudyn_test::all_equal(second.device_address(), 2 * kMiB, 5u));
        std::vector<std::uint32_t> back(4);
        require_ok(take(second_words.subspan(second_words.size() - 4, 4)).copy_to(back));
        CHECK(back == std::vector<std::uint32_t>(4, 5u));

        CHECK(take(first.access(Location::device(0))) == kRW);
        CHECK(take(first.access(Location::device(1))) == AccessFlags::None);
        require_ok(first.set_access(Location::device(0), AccessFlags::Read));
        CHECK(take(first.access(Location::device(0))) == AccessFlags::Read);
        CHECK(before.live_delta() == 4);  // a range, a physical allocation, two mappings
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("teardown is unmap, release, free whatever order the owners die in", "[emulated][cuda11][vmm]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto context = activate(0);
    const DriverSnapshot before;

    SECTION("the range and the memory go first: the mapping keeps both") {
        const DriverSnapshot calls({"cuMemUnmap", "cuMemRelease", "cuMemAddressFree"});
        auto range = take(AddressRange::reserve(4 * kMiB));
        auto memory = take(PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB));
        auto mapping = take(MappedRange::map(range, 2 * kMiB, memory, {{Location::device(0), kRW}}));
        require_error(range.free(), ErrorCode::InvalidArgument, "still live");
        CHECK(calls.calls_since("cuMemAddressFree") == 0);
        { AddressRange gone = std::move(range); }
        require_ok(memory.release());  // shared with the mapping: no cuMemRelease yet
        CHECK(memory.empty());
        CHECK(calls.calls_since("cuMemAddressFree") == 0);
        CHECK(calls.calls_since("cuMemRelease") == 0);
        cudyn_test::fill32(mapping.device_address(), 2 * kMiB, 5u);  // still mapped and usable
        CHECK(cudyn_test::all_equal(mapping.device_address(), 2 * kMiB, 5u));
        require_ok(mapping.unmap());
        CHECK(calls.calls_since("cuMemUnmap") == 1);
        CHECK(calls.calls_since("cuMemRelease") == 1);
        CHECK(calls.calls_since("cuMemAddressFree") == 1);
        CHECK(mapping.empty());
        require_ok(mapping.unmap());  // twice: nothing to do
    }
    SECTION("the mapping goes first, then the range can be freed explicitly") {
        auto range = take(AddressRange::reserve(4 * kMiB));
        auto memory = take(PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB));
        {
            auto mapping = take(MappedRange::map(range, 0, memory, {{Location::device(0), kRW}}));
        }
        CHECK(range.mapping_count() == 0);
        require_ok(range.free());
        CHECK(range.empty());
        const long released = fake.call_count("cuMemRelease");
        require_ok(memory.release());
        CHECK(fake.call_count("cuMemRelease") == released + 1);
    }
    SECTION("moves hand the ownership over") {
        auto range = take(AddressRange::reserve(4 * kMiB));
        auto memory = take(PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB));
        auto mapping = take(MappedRange::map(range, 0, memory, {{Location::device(0), kRW}}));
        MappedRange moved = std::move(mapping);
        CHECK(mapping.empty());
        CHECK(moved.size_bytes() == 2 * kMiB);
        MappedRange assigned;
        assigned = std::move(moved);
        CHECK(range.mapping_count() == 1);
        assigned = MappedRange();  // unmaps
        CHECK(range.mapping_count() == 0);
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("a refused release or free keeps the owner for a retry; a destructor tries once and lets go",
          "[emulated][cuda11][vmm]") {
    auto context = activate(0);
    const DriverSnapshot before;

    SECTION("release() and free() keep what the driver refused") {
        auto range = take(AddressRange::reserve(4 * kMiB));
        auto memory = take(PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB));
        {
            ScopedFault refuse("cuMemRelease:1+:CUDA_ERROR_UNKNOWN,cuMemAddressFree:1+:CUDA_ERROR_UNKNOWN");
            require_error(memory.release(), ErrorCode::Driver, "cuMemRelease");
            require_error(range.free(), ErrorCode::Driver, "cuMemAddressFree");
        }
        CHECK_FALSE(memory.empty());
        CHECK(memory.size_bytes() == 2 * kMiB);
        CHECK_FALSE(range.empty());
        CHECK(range.size_bytes() == 4 * kMiB);
        require_ok(memory.release());
        require_ok(range.free());
        CHECK(memory.empty());
        CHECK(range.empty());
    }
    SECTION("the destructors ask the driver once, then let go of what it kept") {
        const DriverSnapshot calls({"cuMemRelease", "cuMemAddressFree"});
        CUmemGenericAllocationHandle handle = 0;
        CUdeviceptr address = 0;
        {
            const ScopedFault refuse("cuMemRelease:1+:CUDA_ERROR_UNKNOWN,cuMemAddressFree:1+:CUDA_ERROR_UNKNOWN");
            auto range = take(AddressRange::reserve(4 * kMiB));
            auto memory = take(PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB));
            handle = memory.handle();
            address = range.device_address();
        }
        CHECK(calls.calls_since("cuMemRelease") == 1);
        CHECK(calls.calls_since("cuMemAddressFree") == 1);
        // What the driver kept is still there, to be given back by hand.
        CHECK(before.live_delta() == 2);
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemRelease_v10020, handle));
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemAddressFree_v10020, address, 4 * kMiB));
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("VMM bad input is InvalidArgument before any driver call, nothing leaked", "[emulated][cuda11][vmm]") {
    auto context = activate(0);
    constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
    const DriverSnapshot before({"cuMemAddressReserve", "cuMemCreate", "cuMemMap", "cuMemSetAccess"});

    SECTION("reserve") {
        require_error(AddressRange::reserve(0), ErrorCode::InvalidArgument, "size must be non-zero");
        require_error(AddressRange::reserve(4 * kMiB, 3 * kMiB), ErrorCode::InvalidArgument, "not a power of two");
        require_error(AddressRange::reserve(kMax - kMiB, 4 * kMiB), ErrorCode::InvalidArgument, "overflows");
        require_error(AddressRange::reserve(4 * kMiB, 2 * kMiB, 0x10000000000ull + 4096), ErrorCode::InvalidArgument,
                      "not aligned");
        require_error(AddressRange::reserve(4 * kMiB, 0, std::numeric_limits<CUdeviceptr>::max() - kMiB),
                      ErrorCode::InvalidArgument, "overflows");
        before.require_untouched();
    }
    SECTION("properties and sizes") {
        require_error(PhysicalMemory::create(AllocationProperties::device(0), 0), ErrorCode::InvalidArgument,
                      "size must be non-zero");
        require_error(PhysicalMemory::create(AllocationProperties::device(-1), 2 * kMiB), ErrorCode::InvalidArgument,
                      "location");
        require_error(PhysicalMemory::create(AllocationProperties(Location::host_numa_current()), 2 * kMiB),
                      ErrorCode::InvalidArgument, "host NUMA current");
        require_error(PhysicalMemory::create(AllocationProperties::device(0).with_handle_types(
                                                 static_cast<HandleType>(0x40)),
                                             2 * kMiB),
                      ErrorCode::InvalidArgument, "unknown bits 0x40");
        require_error(PhysicalMemory::create(AllocationProperties(Location::host()).with_handle_types(
                                                 HandleType::PosixFileDescriptor),
                                             2 * kMiB),
                      ErrorCode::InvalidArgument, "not shareable");
        require_error(PhysicalMemory::create(AllocationProperties::device(7), 2 * kMiB), ErrorCode::InvalidArgument,
                      "out of range");
        require_error(cudyn::allocation_granularity(AllocationProperties::device(-3)), ErrorCode::InvalidArgument,
                      "location");
        // Misaligned: known after the granularity query, before cuMemCreate.
        require_error(PhysicalMemory::create(AllocationProperties::device(0), 3 * kMiB), ErrorCode::InvalidArgument,
                      "not a multiple of the allocation granularity");
        before.require_untouched();
    }
    SECTION("mapping and access") {
        auto range = take(AddressRange::reserve(8 * kMiB));
        auto memory = take(PhysicalMemory::create(AllocationProperties::device(0), 4 * kMiB));
        const DriverSnapshot mapped({"cuMemMap", "cuMemSetAccess"});
        require_error(MappedRange::map(range, 8 * kMiB, memory), ErrorCode::InvalidArgument, "do not fit");
        require_error(MappedRange::map(range, 6 * kMiB, memory), ErrorCode::InvalidArgument, "do not fit");
        require_error(MappedRange::map(range, kMax - kMiB, memory), ErrorCode::InvalidArgument, "do not fit");
        require_error(MappedRange::map(range, kMiB, memory), ErrorCode::InvalidArgument, "not a multiple");
        require_error(MappedRange::map(AddressRange(), 0, memory), ErrorCode::InvalidArgument, "range is empty");
        require_error(MappedRange::map(range, 0, PhysicalMemory()), ErrorCode::InvalidArgument, "memory is empty");
        // Grants are checked before anything is mapped.
        require_error(MappedRange::map(range, 0, memory, {}), ErrorCode::InvalidArgument, "at least one");
        require_error(MappedRange::map(range, 0, memory, {{Location::device(-1), kRW}}), ErrorCode::InvalidArgument,
                      "negative");
        require_error(MappedRange::map(range, 0, memory, {{Location::device(0), static_cast<AccessFlags>(2)}}),
                      ErrorCode::InvalidArgument, "flags 2");
        require_error(MappedRange::map(range, 0, memory, {{Location::device(0), kRW}, {Location::device(0), kRW}}),
                      ErrorCode::InvalidArgument, "named twice");
        require_error(MappedRange::map(range, 0, memory, {{Location::device(9), kRW}}), ErrorCode::InvalidArgument,
                      "out of range");
        mapped.require_untouched();

        auto mapping = take(MappedRange::map(range, 0, memory));
        const DriverSnapshot doubled({"cuMemMap", "cuMemSetAccess"});
        require_error(MappedRange::map(range, 0, memory), ErrorCode::InvalidArgument, "overlap the mapping at offset 0");
        require_error(MappedRange::map(range, 2 * kMiB, memory), ErrorCode::InvalidArgument, "overlap");
        require_error(mapping.set_access({}), ErrorCode::InvalidArgument, "at least one");
        require_error(mapping.access(Location::device(-2)), ErrorCode::InvalidArgument, "negative");
        require_error(MappedRange().set_access(Location::device(0), kRW), ErrorCode::InvalidArgument, "empty");
        doubled.require_untouched();
        auto after = take(MappedRange::map(range, 4 * kMiB, memory));  // the free half is fine
        CHECK(range.mapping_count() == 2);
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("a device without VMM, handle types and RDMA it lacks give NotSupported", "[emulated][cuda11][vmm]") {
    auto context = activate(0);
    const DriverSnapshot before({"cuMemCreate", "cuMemGetAllocationGranularity"});
    {
        ScopedAttribute no_vmm(0, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0);
        auto caps = cudyn::probe_capabilities(*cudyn::Device::get(0));
        REQUIRE(caps.has_value());
        CHECK_FALSE(caps->virtual_memory_management);
        require_error(cudyn::allocation_granularity(AllocationProperties::device(0)), ErrorCode::NotSupported,
                      "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0");
        require_error(PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB), ErrorCode::NotSupported,
                      "device 0: it does not support virtual memory management");
        require_error(AllocationProperties::device(0).check_supported(), ErrorCode::NotSupported, "device 0");
        // Device 1 still has it.
        require_ok(AllocationProperties::device(1).check_supported());
    }
    {
        ScopedAttribute no_fabric(0, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 0);
        require_error(PhysicalMemory::create(AllocationProperties::device(0).with_handle_types(HandleType::Fabric),
                                             2 * kMiB),
                      ErrorCode::NotSupported, "fabric handles are not supported on device 0");
    }
    {
        ScopedAttribute no_fd(0, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0);
        require_error(PhysicalMemory::create(
                          AllocationProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor), 2 * kMiB),
                      ErrorCode::NotSupported, "posix_fd handles");
    }
    // The fake reports no GPUDirect RDMA on VMM memory.
    require_error(PhysicalMemory::create(AllocationProperties::device(0).with_gpu_direct_rdma(), 2 * kMiB),
                  ErrorCode::NotSupported, "GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED");
    before.require_untouched();
}

TEST_CASE("legacy driver: every VMM entry point is NotSupported, naming it", "[legacy][vmm]") {
    auto context = activate(0);
    const DriverSnapshot before;
    CHECK_FALSE(cudyn::has_entry(&cudyn::DriverTable::cuMemCreate_v10020));
    CHECK_FALSE(cudyn::probe_capabilities(*cudyn::Device::get(0))->virtual_memory_management);
    require_error(cudyn::allocation_granularity(AllocationProperties::device(0)), ErrorCode::NotSupported,
                  "cuMemGetAllocationGranularity");
    require_error(AddressRange::reserve(2 * kMiB), ErrorCode::NotSupported, "cuMemAddressReserve");
    require_error(PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB), ErrorCode::NotSupported,
                  "cuMemGetAllocationGranularity");
    require_error(AllocationProperties::device(0).check_supported(), ErrorCode::NotSupported, "cuMemCreate");
    auto error = cudyn::allocation_granularity(AllocationProperties::device(0));
    REQUIRE_FALSE(error.has_value());
    CHECK(error.error().entry_point == "cuMemGetAllocationGranularity");
    CHECK(error.error().message.find("10.1") != std::string::npos);
    CHECK(before.live_delta() == 0);
}

TEST_CASE("multi-GPU: memory on device 1 written from device 0", "[emulated][cuda11][vmm]") {
    const DriverSnapshot before;
    {
        auto range = take(AddressRange::reserve(4 * kMiB));
        auto memory = take(PhysicalMemory::create(AllocationProperties::device(1), 2 * kMiB));
        auto mapping = take(
            MappedRange::map(range, 0, memory, {{Location::device(1), kRW}, {Location::device(0), kRW}}));
        CHECK(*mapping.memory_location() == Location::device(1));
        CHECK(take(mapping.access(Location::device(0))) == kRW);
        {
            auto on_zero = activate(0);
            cudyn_test::fill32(mapping.device_address(), 2 * kMiB, 0x600DF00Du);
        }
        auto on_one = activate(1);
        CHECK(cudyn_test::all_equal(mapping.device_address(), 2 * kMiB, 0x600DF00Du));
    }
    {
        // No peer path from 0 to 1: a clear NotSupported, nothing mapped.
        set_peer_access(0, 1, 0);
        auto range = take(AddressRange::reserve(4 * kMiB));
        auto memory = take(PhysicalMemory::create(AllocationProperties::device(1), 2 * kMiB));
        const DriverSnapshot calls({"cuMemMap"});
        auto refused = MappedRange::map(range, 0, memory, {{Location::device(1), kRW}, {Location::device(0), kRW}});
        require_error(refused, ErrorCode::NotSupported, "device 0 cannot access memory on device 1");
        CHECK(refused.error().entry_point == "cuDeviceCanAccessPeer");
        CHECK(calls.calls_since("cuMemMap") == 0);
        auto mapping = take(MappedRange::map(range, 0, memory, {{Location::device(1), kRW}}));
        require_error(mapping.set_access(Location::device(0), AccessFlags::Read), ErrorCode::NotSupported,
                      "cuDeviceCanAccessPeer");
        CHECK(take(mapping.access(Location::device(0))) == AccessFlags::None);
        set_peer_access(0, 1, 1);
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("access None really faults, in a child process", "[emulated][cuda11][vmm]") {
    auto context = activate(0);
    auto range = take(AddressRange::reserve(4 * kMiB));
    auto memory = take(PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB));
    auto mapping = take(MappedRange::map(range, 0, memory));
    const auto address = static_cast<std::uintptr_t>(mapping.device_address());
    // A fresh mapping is inaccessible until access is set, like the driver's.
    CHECK(cudyn_test::touch_in_child(address, false) == SIGSEGV);
    require_ok(mapping.set_access(Location::device(0), kRW));
    CHECK(cudyn_test::touch_in_child(address, true) == 0);  // the harness itself works
    require_ok(mapping.set_access(Location::device(0), AccessFlags::Read));
    CHECK(cudyn_test::touch_in_child(address, false) == 0);
    CHECK(cudyn_test::touch_in_child(address, true) == SIGSEGV);
    require_ok(mapping.set_access(Location::device(0), AccessFlags::None));
    CHECK(cudyn_test::touch_in_child(address, false) == SIGSEGV);
    // Reserved but unmapped addresses fault too, and the driver refuses copies there.
    CHECK(cudyn_test::touch_in_child(address + 2 * kMiB, false) == SIGSEGV);
    std::uint32_t word = 0;
    CHECK_FALSE(cudyn::call_driver(&cudyn::DriverTable::cuMemcpyDtoH_v3020, &word, mapping.device_address(), sizeof word)
                    .has_value());
}

TEST_CASE("fault injection at each VMM step leaves nothing live", "[emulated][cuda11][vmm]") {
    auto context = activate(0);
    const DriverSnapshot before;
    const char* specs[] = {"cuMemAddressReserve", "cuMemGetAllocationGranularity", "cuMemCreate", "cuMemMap",
                           "cuMemSetAccess"};
    for (const char* spec : specs) {
        INFO(spec);
        {
            cudyn::detail::forget_granularity_answers();  // so that the query is asked, and fails when injected
            ScopedFault fault(spec);
            auto range = AddressRange::reserve(4 * kMiB);
            auto memory = PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB);
            bool failed = !range || !memory;
            if (range && memory) {
                auto mapping = MappedRange::map(*range, 0, *memory, {{Location::device(0), kRW}});
                failed = !mapping;
                if (!mapping) CHECK(mapping.error().entry_point == spec);
                CHECK(range->mapping_count() == 0);
            }
            CHECK(failed);
        }
        CHECK(before.live_delta() == 0);
    }
    // The injected error code comes back mapped.
    ScopedFault fault("cuMemCreate:1:CUDA_ERROR_OUT_OF_MEMORY");
    require_error(PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB), ErrorCode::OutOfMemory,
                  "cuMemCreate");
}

TEST_CASE("host NUMA physical memory mapped for a device", "[emulated][vmm]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        const auto props = AllocationProperties::host_numa(1);
        auto range = take(AddressRange::reserve(2 * kMiB));
        auto memory = take(PhysicalMemory::create(props, 2 * kMiB));
        CHECK(memory.properties()->location() == Location::host_numa(1));
        auto mapping = take(MappedRange::map(range, 0, memory, {{Location::device(0), kRW}}));
        cudyn_test::fill32(mapping.device_address(), 2 * kMiB, 3u);
        CHECK(cudyn_test::all_equal(mapping.device_address(), 2 * kMiB, 3u));
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("the fake's shareable handles: POSIX fd and fabric (modelled) import the same bytes",
          "[emulated][cuda11][vmm][modelled]") {
    // The fabric half needs an IMEX channel, which no machine measured had.
    const ScopedImexChannel imex;
    auto context = activate(0);
    const DriverSnapshot before;
    {
        // Fabric handles are a CUDA 12 attribute: the cuda11 fake has none.
        const bool fabric = FakeDriver::loaded().variant() == "emulated";
        const auto props = AllocationProperties::device(0).with_handle_types(
            fabric ? HandleType::PosixFileDescriptor | HandleType::Fabric : HandleType::PosixFileDescriptor);
        auto range = take(AddressRange::reserve(8 * kMiB));
        auto memory = take(PhysicalMemory::create(props, 2 * kMiB));
        auto mapping = take(MappedRange::map(range, 0, memory, {{Location::device(0), kRW}}));
        cudyn_test::fill32(mapping.device_address(), 2 * kMiB, 0xABCDu);

        CUmemAllocationProp got{};
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemGetAllocationPropertiesFromHandle_v10020, &got,
                                      memory.handle()));
        CHECK(got.requestedHandleTypes == props.to_cu().requestedHandleTypes);
        CHECK(got.location.id == 0);

        int fd = -1;
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemExportToShareableHandle_v10020, static_cast<void*>(&fd),
                                      memory.handle(), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0ULL));
        REQUIRE(fd >= 0);
        CUmemGenericAllocationHandle imported = 0;
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemImportFromShareableHandle_v10020, &imported,
                                      reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        ::close(fd);
        const CUdeviceptr second = range.device_address() + 4 * kMiB;
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemMap_v10020, second, 2 * kMiB, std::size_t{0}, imported,
                                      0ULL));
        const CUmemAccessDesc rw = cudyn::AccessGrant{Location::device(0), kRW}.to_cu();
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemSetAccess_v10020, second, 2 * kMiB, &rw, std::size_t{1}));
        CHECK(cudyn_test::all_equal(second, 2 * kMiB, 0xABCDu));

        if (fabric) {
            CUmemFabricHandle blob{};
            require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemExportToShareableHandle_v10020,
                                          static_cast<void*>(&blob), memory.handle(), CU_MEM_HANDLE_TYPE_FABRIC, 0ULL));
            CUmemGenericAllocationHandle from_fabric = 0;
            require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemImportFromShareableHandle_v10020, &from_fabric,
                                          static_cast<void*>(&blob), CU_MEM_HANDLE_TYPE_FABRIC));
            CHECK(from_fabric != imported);
            const CUdeviceptr third = range.device_address() + 2 * kMiB;
            require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemMap_v10020, third, 2 * kMiB, std::size_t{0},
                                          from_fabric, 0ULL));
            require_ok(
                cudyn::call_driver(&cudyn::DriverTable::cuMemSetAccess_v10020, third, 2 * kMiB, &rw, std::size_t{1}));
            CHECK(cudyn_test::all_equal(third, 2 * kMiB, 0xABCDu));
            require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemUnmap_v10020, third, 2 * kMiB));
            require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemRelease_v10020, from_fabric));
        }

        // Retain through an address: the handle behind the mapping, one more reference.
        CUmemGenericAllocationHandle retained = 0;
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemRetainAllocationHandle_v11000, &retained,
                                      reinterpret_cast<void*>(static_cast<std::uintptr_t>(second))));
        CHECK(retained == imported);
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemRelease_v10020, retained));

        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemUnmap_v10020, second, 2 * kMiB));
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemRelease_v10020, imported));
        // Exporting a type not requested at creation is refused.
        auto plain = take(PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB));
        CHECK_FALSE(cudyn::call_driver(&cudyn::DriverTable::cuMemExportToShareableHandle_v10020,
                                       static_cast<void*>(&fd), plain.handle(),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0ULL)
                        .has_value());
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("the fake validates VMM calls like the driver", "[emulated][cuda11][vmm]") {
    auto context = activate(0);
    const DriverSnapshot before;
    const cudyn::DriverTable& cu = cudyn::driver();
    CUdeviceptr base = 0;
    REQUIRE(cu.cuMemAddressReserve_v10020(&base, 3 * kMiB, 0, 0, 0) == CUDA_ERROR_INVALID_VALUE);  // not 2 MiB-granular
    REQUIRE(cu.cuMemAddressReserve_v10020(&base, 8 * kMiB, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(base % (2 * kMiB) == 0);
    const CUmemAllocationProp prop = AllocationProperties::device(0).to_cu();
    CUmemGenericAllocationHandle handle = 0;
    REQUIRE(cu.cuMemCreate_v10020(&handle, 4 * kMiB, &prop, 0) == CUDA_SUCCESS);
    CHECK(cu.cuMemMap_v10020(base + kMiB, 2 * kMiB, 0, handle, 0) == CUDA_ERROR_INVALID_VALUE);      // misaligned
    CHECK(cu.cuMemMap_v10020(base + 6 * kMiB, 4 * kMiB, 0, handle, 0) == CUDA_ERROR_INVALID_VALUE);  // past the range
    CHECK(cu.cuMemMap_v10020(base, 2 * kMiB, 2 * kMiB, handle, 0) == CUDA_ERROR_INVALID_VALUE);      // offset must be 0
    REQUIRE(cu.cuMemMap_v10020(base, 4 * kMiB, 0, handle, 0) == CUDA_SUCCESS);
    CHECK(cu.cuMemMap_v10020(base + 2 * kMiB, 2 * kMiB, 0, handle, 0) == CUDA_ERROR_INVALID_VALUE);  // overlap
    CHECK(cu.cuMemAddressFree_v10020(base, 8 * kMiB) == CUDA_ERROR_INVALID_VALUE);                  // still mapped
    CHECK(cu.cuMemRelease_v10020(handle) == CUDA_SUCCESS);  // allowed while mapped: memory lives on
    CHECK(before.live_delta() == 3);  // the range, the mapping and the memory it keeps alive
    const CUmemAccessDesc rw = cudyn::AccessGrant{Location::device(0), kRW}.to_cu();
    CHECK(cu.cuMemSetAccess_v10020(base, 8 * kMiB, &rw, 1) == CUDA_ERROR_INVALID_VALUE);  // part unmapped
    REQUIRE(cu.cuMemSetAccess_v10020(base, 4 * kMiB, &rw, 1) == CUDA_SUCCESS);
    CHECK(cu.cuMemUnmap_v10020(base, 2 * kMiB) == CUDA_ERROR_INVALID_VALUE);  // part of a mapping
    CHECK(cu.cuMemUnmap_v10020(base, 4 * kMiB) == CUDA_SUCCESS);
    CHECK(cu.cuMemRelease_v10020(handle) == CUDA_ERROR_INVALID_VALUE);  // already released and unmapped: gone
    CHECK(cu.cuMemAddressFree_v10020(base, 8 * kMiB) == CUDA_SUCCESS);
    CHECK(before.live_delta() == 0);
}

// ---- access over a whole reservation ------------------------------------------------------------

TEST_CASE("set_range_access: one call over chunks of two devices; a checked span across them",
          "[emulated][cuda11][vmm]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        auto range = take(AddressRange::reserve(6 * kMiB));
        auto first = take(PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB));
        auto second = take(PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB));
        auto third = take(PhysicalMemory::create(AllocationProperties::device(1), 2 * kMiB));
        auto a = take(MappedRange::map(range, 0, first));
        auto b = take(MappedRange::map(range, 2 * kMiB, second));
        // Not every byte mapped yet: refused before the driver, naming the first hole.
        const DriverSnapshot calls({"cuMemSetAccess"});
        require_error(cudyn::set_range_access(range, {{Location::device(0), kRW}}), ErrorCode::InvalidArgument,
                      "byte 4194304 of the range");
        require_error(cudyn::range_span_as<std::uint32_t>(range, Location::device(0)), ErrorCode::InvalidArgument,
                      "is not mapped");
        auto c = take(MappedRange::map(range, 4 * kMiB, third));
        // Mapped but inaccessible: the span is refused, naming the mapping.
        require_error(cudyn::range_span_as<std::uint32_t>(range, Location::device(0)), ErrorCode::InvalidArgument,
                      "has none access to the mapping at offset 0");
        CHECK(calls.calls_since("cuMemSetAccess") == 0);
        CHECK(take(cudyn::range_access(range, Location::device(0))) == AccessFlags::None);
        require_ok(cudyn::set_range_access(range, {{Location::device(0), kRW}}));
        CHECK(calls.calls_since("cuMemSetAccess") == 1);
        CHECK(take(a.access(Location::device(0))) == kRW);
        CHECK(take(c.access(Location::device(0))) == kRW);
        CHECK(take(cudyn::range_access(range, Location::device(0))) == kRW);
        // One span over all three mappings: written and read back through it.
        auto all = take(cudyn::range_span_as<std::uint32_t>(range, Location::device(0)));
        CHECK(all.size_bytes() == 6 * kMiB);
        require_ok(all.fill(0x5EEDu));
        CHECK(cudyn_test::all_equal(range.device_address(), 6 * kMiB, 0x5EEDu));
        // A part of it, and read-only access asked of a mapping that has less.
        auto tail = take(cudyn::range_span_as<std::uint32_t>(range, 3 * kMiB, 2 * kMiB, Location::device(0)));
        CHECK(tail.device_address() == range.device_address() + 3 * kMiB);
        require_ok(c.set_access(Location::device(0), AccessFlags::Read));
        CHECK(take(cudyn::range_access(range, Location::device(0))) == AccessFlags::Read);
        require_error(cudyn::range_span_as<std::uint32_t>(range, 3 * kMiB, 2 * kMiB, Location::device(0)),
                      ErrorCode::InvalidArgument, "has read access to the mapping at offset 4194304, not read_write");
        CHECK(cudyn::range_span_as<const std::uint32_t>(range, 3 * kMiB, 2 * kMiB, Location::device(0),
                                                        AccessFlags::Read)
                  .has_value());
        // Outside the range, and misaligned elements.
        require_error(cudyn::range_span_as<std::uint32_t>(range, 5 * kMiB, 2 * kMiB, Location::device(0)),
                      ErrorCode::InvalidArgument, "run past");
        require_error(cudyn::range_span_as<std::uint64_t>(range, 4, 16, Location::device(0), AccessFlags::Read),
                      ErrorCode::InvalidArgument, "");
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("set_range_access checks every mapping's memory before it sets anything", "[emulated][cuda11][vmm]") {
    auto context = activate(0);
    auto range = take(AddressRange::reserve(4 * kMiB));
    auto near = take(PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB));
    auto far = take(PhysicalMemory::create(AllocationProperties::device(1), 2 * kMiB));
    auto a = take(MappedRange::map(range, 0, near, {{Location::device(0), kRW}}));
    auto b = take(MappedRange::map(range, 2 * kMiB, far, {{Location::device(1), kRW}}));
    set_peer_access(0, 1, 0);
    const DriverSnapshot calls({"cuMemSetAccess"});
    require_error(cudyn::set_range_access(range, {{Location::device(0), AccessFlags::Read}}), ErrorCode::NotSupported,
                  "the mapping at offset 2097152");
    CHECK(calls.calls_since("cuMemSetAccess") == 0);
    set_peer_access(0, 1, 1);
    require_error(cudyn::set_range_access(AddressRange(), {{Location::device(0), kRW}}), ErrorCode::InvalidArgument,
                  "the range is empty");
    require_error(cudyn::set_range_access(range, std::vector<cudyn::AccessGrant>{}), ErrorCode::InvalidArgument,
                  "at least one");
}

TEST_CASE("a grant through the range makes a mapping's unmap wait for the device granted", "[emulated][vmm]") {
    auto context = activate(0);
    auto range = take(AddressRange::reserve(2 * kMiB));
    auto memory = take(PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB));
    auto mapping = take(MappedRange::map(range, 0, memory, {{Location::device(0), kRW}}));
    require_ok(cudyn::set_range_access(range, {{Location::device(1), kRW}}));
    // Device 1's primary context is active; its work must be waited for before the unmap.
    auto on_one = activate(1);
    auto scratch = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(4));
    auto restore = activate(0);
    FakeDriver::loaded().reset_counts();
    require_ok(mapping.unmap());
    // One cuCtxSynchronize for the mapping's own context, one for device 1's.
    CHECK(FakeDriver::loaded().call_count("cuCtxSynchronize") == 2);
}
