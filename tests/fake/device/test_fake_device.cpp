// The device layer (Device, capabilities, PrimaryContext, Stream) on the fake
// drivers that emulate a device, with fault injection and leak counts.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"

#include "device/device_facts.hpp"  // forget_capabilities: the fake's attributes change, a driver's do not

#include <string>
#include <utility>

using cudyn_test::FakeDriver;
using cudyn_test::ScopedFault;

TEST_CASE("devices: count, name, memory, compute capability, peers", "[emulated][cuda12][cuda11][legacy][device]") {
    auto count = cudyn::Device::count();
    REQUIRE(count.has_value());
    REQUIRE(*count == 2);  // the fake suites run with FAKECUDA_DEVICES=2
    auto first = cudyn::Device::get(0);
    auto second = cudyn::Device::get(1);
    REQUIRE(first.has_value());
    REQUIRE(second.has_value());
    CHECK(first->ordinal() == 0);
    CHECK(*first->name() == "cudyn emulated device 0");
    CHECK(*first->total_memory() == std::size_t{80} << 30);
    auto cc = first->compute_capability();
    REQUIRE(cc.has_value());
    CHECK(cc->major == 9);
    CHECK(cc->minor == 0);
    CHECK(*first->can_access_peer(*second) == true);

    for (int bad : {-1, 2, 1000}) {
        auto device = cudyn::Device::get(bad);
        REQUIRE_FALSE(device.has_value());
        CHECK(device.error().code == cudyn::ErrorCode::InvalidArgument);
        CHECK(device.error().message.find("out of range") != std::string::npos);
    }
}

TEST_CASE("devices: UUID, PCI bus id, LUID, and finding a device by them", "[emulated][cuda12][cuda11][legacy][device]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto first = cudyn::Device::get(0);
    auto second = cudyn::Device::get(1);
    REQUIRE(first.has_value());
    REQUIRE(second.has_value());
    // Fixed per device; both UUID ABIs (legacy has only the 9.2 one) agree.
    auto uuid0 = first->uuid();
    auto uuid1 = second->uuid();
    REQUIRE(uuid0.has_value());
    REQUIRE(uuid1.has_value());
    CHECK(uuid0->to_string() == "GPU-6366616b-6500-4000-8000-000000000000");
    CHECK(uuid1->to_string() == "GPU-6366616b-6500-4000-8000-000000000001");
    // The 11.4 ABI where the driver has it (a MIG instance's own UUID).
    const bool has_v2 = fake.variant() != "legacy";
    CHECK((fake.call_count("cuDeviceGetUuid_v2") > 0) == has_v2);
    CHECK((fake.call_count("cuDeviceGetUuid") > 0) == !has_v2);

    auto bus0 = first->pci_bus_id();
    auto bus1 = second->pci_bus_id();
    REQUIRE(bus0.has_value());
    REQUIRE(bus1.has_value());
    CHECK(bus0->to_string() == "0000:18:00.0");  // the PCI attributes' domain, bus and device
    CHECK(bus1->to_string() == "0000:28:00.0");
    CHECK(*bus1 == (cudyn::PciBusId{0, std::uint32_t(*second->attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)), 0, 0}));

    auto by_uuid = cudyn::Device::by_uuid(*uuid1);
    REQUIRE(by_uuid.has_value());
    CHECK(by_uuid->ordinal() == 1);
    for (const char* text : {"0000:28:00.0", "00000000:28:00.0", "28:00.0"}) {
        auto by_bus = cudyn::Device::by_pci_bus_id(text);
        INFO(text);
        REQUIRE(by_bus.has_value());
        CHECK(by_bus->ordinal() == 1);
    }

    cudyn::DeviceUuid absent = *uuid1;
    absent.bytes[15] = 0x7f;
    auto no_uuid = cudyn::Device::by_uuid(absent);
    REQUIRE_FALSE(no_uuid.has_value());
    CHECK(no_uuid.error().code == cudyn::ErrorCode::InvalidArgument);
    CHECK(no_uuid.error().message.find(absent.to_string()) != std::string::npos);
    auto no_bus = cudyn::Device::by_pci_bus_id("0000:99:00.0");
    REQUIRE_FALSE(no_bus.has_value());
    CHECK(no_bus.error().code == cudyn::ErrorCode::InvalidArgument);
    CHECK(no_bus.error().message.find("0000:99:00.0") != std::string::npos);

    auto luid = first->luid();
#if defined(_WIN32)
    REQUIRE(luid.has_value());
    CHECK(luid->node_mask == 1);
#else
    REQUIRE_FALSE(luid.has_value());
    CHECK(luid.error().code == cudyn::ErrorCode::NotSupported);
#endif

    // A failing driver call is the driver's error, not a made-up identity.
    ScopedFault fault("cuDeviceGetPCIBusId:1:CUDA_ERROR_UNKNOWN");
    auto failed = first->pci_bus_id();
    REQUIRE_FALSE(failed.has_value());
    CHECK(failed.error().driver_result == CUDA_ERROR_UNKNOWN);
}

TEST_CASE("capabilities follow the device attributes", "[emulated][cuda12][cuda11][legacy][device]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto device = cudyn::Device::get(0);
    REQUIRE(device.has_value());
    auto caps = cudyn::probe_capabilities(*device);
    REQUIRE(caps.has_value());
#if defined(__linux__)
    CHECK(caps->virtual_memory_management == (fake.variant() != "legacy"));
#else
    CHECK_FALSE(caps->virtual_memory_management);  // the fake emulates VMM on Linux only
#endif
    CHECK(caps->concurrent_managed_access);
    CHECK(caps->can_map_host_memory);
    CHECK(caps->unified_addressing);

    // Every row of the capability list is read: the newer flags too.
    CHECK(caps->win32_kmt_handles == caps->win32_handles);
    CHECK(caps->host_virtual_memory_management == (fake.variant() == "emulated"));
    CHECK(caps->host_numa_virtual_memory_management == (fake.variant() == "emulated"));
#if defined(__linux__)
    CHECK(caps->dma_buf == (fake.variant() != "legacy"));  // DMA_BUF_SUPPORTED: an 11.x attribute
#endif
    CHECK_FALSE(caps->host_alloc_dma_buf);  // 0, as on an H200

    // A real driver never changes an attribute while loaded, so cudyn reads
    // each device's once; the fake can, and the cache is forgotten around it.
    fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 0);
    cudyn::detail::forget_capabilities();
    auto changed = cudyn::probe_capabilities(*device);
    fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1);
    cudyn::detail::forget_capabilities();
    REQUIRE(changed.has_value());
    CHECK_FALSE(changed->can_map_host_memory);
    CHECK(cudyn::probe_capabilities(*device)->can_map_host_memory);
}

TEST_CASE("capabilities are read once per device; a failed read is not kept", "[emulated][cuda12][cuda11][legacy][device]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto device = cudyn::Device::get(1);
    REQUIRE(device.has_value());
    cudyn::detail::forget_capabilities();
    {
        // Out of memory is no answer: it fails the probe, and is not stored.
        const ScopedFault fault("cuDeviceGetAttribute:3:CUDA_ERROR_OUT_OF_MEMORY");
        auto failed = cudyn::probe_capabilities(*device);
        REQUIRE_FALSE(failed.has_value());
        CHECK(failed.error().code == cudyn::ErrorCode::OutOfMemory);
        CHECK(failed.error().entry_point == "cuDeviceGetAttribute");
    }
    // So the next probe asks the driver again, one read per capability...
    const long reads = fake.call_count("cuDeviceGetAttribute");
    auto first = cudyn::probe_capabilities(*device);
    REQUIRE(first.has_value());
    CHECK(fake.call_count("cuDeviceGetAttribute") - reads == static_cast<long>(cudyn::device_capability_count));
    CHECK(first->unified_addressing);
    // ...and then never again, for the probe or for the checks built on it.
    const long stored = fake.call_count("cuDeviceGetAttribute");
    for (int i = 0; i < 3; ++i) {
        auto again = cudyn::probe_capabilities(*device);
        REQUIRE(again.has_value());
        for (const cudyn::DeviceCapabilityInfo& row : cudyn::device_capability_list) {
            INFO(row.name);
            CHECK((*again).*row.field == (*first).*row.field);
        }
    }
    CHECK(fake.call_count("cuDeviceGetAttribute") == stored);

    // An attribute the driver does not know is an answer ("no"), and is stored.
    cudyn::detail::forget_capabilities();
    {
        const ScopedFault fault("cuDeviceGetAttribute:1+:CUDA_ERROR_INVALID_VALUE");
        auto unknown = cudyn::probe_capabilities(*device);
        REQUIRE(unknown.has_value());
        for (const cudyn::DeviceCapabilityInfo& row : cudyn::device_capability_list) {
            INFO(row.name);
            CHECK_FALSE((*unknown).*row.field);
        }
        const long unknown_stored = fake.call_count("cuDeviceGetAttribute");
        CHECK_FALSE(cudyn::probe_capabilities(*device)->unified_addressing);
        CHECK(fake.call_count("cuDeviceGetAttribute") == unknown_stored);
    }
    cudyn::detail::forget_capabilities();  // back to the fake's real answers for the tests after this one
    CHECK(cudyn::probe_capabilities(*device)->unified_addressing);
}

TEST_CASE("PrimaryContext retains once per owner and releases on destruction", "[emulated][cuda12][cuda11][device]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto device = cudyn::Device::get(1);
    REQUIRE(device.has_value());
    const int before = fake.primary_ctx_refcount(1);
    {
        auto context = cudyn::PrimaryContext::activate(*device);
        REQUIRE(context.has_value());
        CHECK(fake.primary_ctx_refcount(1) == before + 1);
        CUcontext current = nullptr;
        REQUIRE(cudyn::call_driver(&cudyn::DriverTable::cuCtxGetCurrent_v4000, &current).has_value());
        CHECK(current == context->handle());

        cudyn::PrimaryContext moved = std::move(*context);
        CHECK(context->handle() == nullptr);
        CHECK(fake.primary_ctx_refcount(1) == before + 1);
        auto empty = context->make_current();
        REQUIRE_FALSE(empty.has_value());
        CHECK(empty.error().code == cudyn::ErrorCode::InvalidArgument);
    }
    CHECK(fake.primary_ctx_refcount(1) == before);
    // The 11.0 release ABI is preferred where the driver has it.
    CHECK(fake.call_count("cuDevicePrimaryCtxRelease_v2") >= 1);
}

TEST_CASE("Stream: create, synchronize, destroy; failures leak nothing", "[emulated][cuda12][cuda11][legacy][device]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto device = cudyn::Device::get(0);
    REQUIRE(device.has_value());
    auto context = cudyn::PrimaryContext::activate(*device);
    REQUIRE(context.has_value());
    const long streams_before = fake.live_streams();
    {
        auto stream = cudyn::Stream::create();
        REQUIRE(stream.has_value());
        CHECK(fake.live_streams() == streams_before + 1);
        CHECK(stream->synchronize().has_value());
        cudyn::Stream moved = std::move(*stream);
        CHECK_FALSE(stream->owned());
        CHECK(moved.owned());
    }
    CHECK(fake.live_streams() == streams_before);
    CHECK(cudyn::Stream::legacy_default().synchronize().has_value());
    CHECK(cudyn::Stream::per_thread_default().handle() == CU_STREAM_PER_THREAD);

    {
        ScopedFault fault("cuStreamCreate");
        auto failed = cudyn::Stream::create();
        REQUIRE_FALSE(failed.has_value());
        CHECK(failed.error().code == cudyn::ErrorCode::OutOfMemory);
        CHECK(failed.error().entry_point == "cuStreamCreate");
        CHECK(fake.live_streams() == streams_before);
    }
    {
        ScopedFault fault("cuStreamDestroy_v2:1:CUDA_ERROR_INVALID_HANDLE");
        auto stream = cudyn::Stream::create();
        REQUIRE(stream.has_value());
        auto destroyed = stream->destroy();
        REQUIRE_FALSE(destroyed.has_value());
        CHECK(destroyed.error().driver_result == CUDA_ERROR_INVALID_HANDLE);
        // The owner gave the handle up; its destructor does not try again.
    }
}

TEST_CASE("destructors stay silent once the driver is deinitialised", "[emulated][device]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto device = cudyn::Device::get(0);
    REQUIRE(device.has_value());
    auto context = cudyn::PrimaryContext::activate(*device);
    REQUIRE(context.has_value());
    auto stream = cudyn::Stream::create();
    REQUIRE(stream.has_value());
    fake.set_deinitialized(true);
    // What exit-time destruction meets: every call answers DEINITIALIZED.
    auto status = stream->synchronize();
    CHECK_FALSE(status.has_value());
    {
        cudyn::Stream dying = std::move(*stream);
        cudyn::PrimaryContext also_dying = std::move(*context);
    }  // destructors run here, ignore the errors, neither throw nor abort
    fake.set_deinitialized(false);
    CHECK(fake.call_count("cuStreamDestroy_v2") >= 1);
}
