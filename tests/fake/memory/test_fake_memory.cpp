// Device, pinned, mapped and registered memory and memory information on the
// fake drivers that emulate memory (emulated, cuda11, legacy): data
// round-trips, bad input rejected before the driver, fault injection on every
// call a constructor makes, and the live-allocation count after each.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"  // take

#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/host_registration.hpp"
#include "cudyn/memory/zero_copy_buffer.hpp"
#include "cudyn/memory/memory_info.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/memory/managed_buffer.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

using cudyn::ErrorCode;
using namespace cudyn_test;  // FakeDriver, ScopedFault, activate, DriverSnapshot, require_error

namespace {

constexpr std::size_t kHuge = std::numeric_limits<std::size_t>::max() / 4 + 1;  // * sizeof(uint32_t) overflows

// Every injected failure of one of `entries` makes `construct` fail with the
// injected code and leaves no live allocation.
template <typename Construct>
void require_faults_leave_nothing(std::initializer_list<const char*> entries, Construct construct) {
    for (const char* entry : entries) {
        INFO("failing " << entry);
        const DriverSnapshot before;
        {
            ScopedFault fault((std::string(entry) + ":1:CUDA_ERROR_INVALID_VALUE").c_str());
            auto result = construct();
            REQUIRE_FALSE(result.has_value());
            CHECK(result.error().driver_result == CUDA_ERROR_INVALID_VALUE);
            CHECK(result.error().entry_point == entry);
        }
        CHECK(before.live_delta() == 0);
    }
}

}  // namespace

// --- DeviceBuffer --------------------------------------------------------------------

TEST_CASE("DeviceBuffer round-trips data synchronously and on a stream", "[emulated][cuda11][legacy][device-buffer]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto context = activate(0);
    const DriverSnapshot before;
    {
        auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(1000);
        REQUIRE(buffer.has_value());
        CHECK(buffer->size() == 1000);
        CHECK(buffer->size_bytes() == 4000);
        CHECK(buffer->device_address() == buffer->device_address());
        CHECK(buffer->device_address() != 0);
        CHECK(before.live_delta() == 1);

        const auto values = iota_vector(1000, 7);
        REQUIRE(buffer->copy_from(values).has_value());
        std::vector<std::uint32_t> back(1000, 0);
        REQUIRE(buffer->copy_to(back).has_value());
        CHECK(back == values);

        // Part of a buffer is a subspan of its view; offsets are in elements.
        const std::vector<std::uint32_t> patch = {900, 901, 902};
        REQUIRE(take(buffer->device_span().subspan(10, patch.size())).copy_from(patch).has_value());
        std::vector<std::uint32_t> window(5, 0);
        REQUIRE(take(buffer->device_span().subspan(9, window.size())).copy_to(window).has_value());
        CHECK(window == std::vector<std::uint32_t>{16, 900, 901, 902, 20});

        auto stream = cudyn::Stream::create();
        REQUIRE(stream.has_value());
        const auto other = iota_vector(1000, 50000);
        REQUIRE(buffer->copy_from(other, *stream).has_value());
        std::vector<std::uint32_t> async_back(1000, 0);
        REQUIRE(buffer->copy_to(async_back, stream->handle()).has_value());
        REQUIRE(stream->synchronize().has_value());
        CHECK(async_back == other);
        CHECK(fake.call_count("cuMemcpyHtoDAsync_v2") >= 1);
        CHECK(fake.call_count("cuMemcpyDtoHAsync_v2") >= 1);

        // Device to device, then sets.
        auto copy = cudyn::DeviceBuffer<std::uint32_t>::allocate(1000);
        REQUIRE(copy.has_value());
        REQUIRE(copy->copy_from(*buffer).has_value());
        CHECK(read_device(copy->device_address(), 1000) == other);
        REQUIRE(copy->copy_from(*buffer, *stream).has_value());
        REQUIRE(copy->fill(0xDEADBEEFu).has_value());
        CHECK(read_device(copy->device_address(), 1000) == std::vector<std::uint32_t>(1000, 0xDEADBEEFu));
        REQUIRE(copy->fill(5u, *stream).has_value());
        REQUIRE(stream->synchronize().has_value());
        CHECK(read_device(copy->device_address(), 1000) == std::vector<std::uint32_t>(1000, 5u));
        REQUIRE(copy->set_bytes(0x01).has_value());
        CHECK(read_device(copy->device_address(), 1000) == std::vector<std::uint32_t>(1000, 0x01010101u));
        REQUIRE(copy->set_bytes(0x02, *stream).has_value());
        REQUIRE(stream->synchronize().has_value());
        CHECK(read_device(copy->device_address(), 1) == std::vector<std::uint32_t>{0x02020202u});

        // 4-byte elements of another type fill by their bits.
        auto floats = cudyn::DeviceBuffer<float>::allocate(4);
        REQUIRE(floats.has_value());
        REQUIRE(floats->fill(1.0f).has_value());
        CHECK(read_device(floats->device_address(), 1) == std::vector<std::uint32_t>{0x3F800000u});
        CHECK(before.live_delta() == 3);
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("DeviceBuffer rejects bad input before the driver, leaking nothing",
          "[emulated][cuda11][legacy][device-buffer]") {
    auto context = activate(0);
    const char* entries[] = {"cuMemAlloc_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyDtoD_v2",
                             "cuMemsetD8_v2", "cuMemsetD32_v2", "cuMemcpyHtoDAsync_v2"};
    auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(16);
    REQUIRE(buffer.has_value());
    const DriverSnapshot before(
        {entries[0], entries[1], entries[2], entries[3], entries[4], entries[5], entries[6]});

    require_error(cudyn::DeviceBuffer<std::uint32_t>::allocate(0), ErrorCode::InvalidArgument,
                  "count must be non-zero");
    require_error(cudyn::DeviceBuffer<std::uint32_t>::allocate(kHuge), ErrorCode::InvalidArgument, "overflows");

    std::vector<std::uint32_t> host(16, 1);
    const std::vector<std::uint32_t> empty;
    require_error(buffer->copy_from(cudyn::HostSpan<const std::uint32_t>(nullptr, 4)), ErrorCode::InvalidArgument,
                  "source has a null data pointer");
    require_error(buffer->copy_from(cudyn::HostSpan<const std::uint32_t>(host.data(), 0)), ErrorCode::InvalidArgument,
                  "source is empty");
    require_error(buffer->copy_to(cudyn::HostSpan<std::uint32_t>(nullptr, 4)), ErrorCode::InvalidArgument,
                  "destination has a null data pointer");
    require_error(buffer->device_span().subspan(1, 16), ErrorCode::InvalidArgument, "run past the 16 of the span");
    require_error(buffer->device_span().subspan(std::numeric_limits<std::size_t>::max(), 1),
                  ErrorCode::InvalidArgument, "run past");
    require_error(take(buffer->device_span().subspan(8, 8)).copy_from(host, cudyn::Stream::legacy_default()),
                  ErrorCode::InvalidArgument, "count 16 exceeds the size 8");

    auto bigger = cudyn::DeviceBuffer<std::uint32_t>::allocate(17);
    REQUIRE(bigger.has_value());
    require_error(buffer->copy_from(*bigger), ErrorCode::InvalidArgument, "does not fit");
    require_error(buffer->copy_from(*buffer), ErrorCode::InvalidArgument, "source is the destination");

    // Use after move: the moved-from buffer is empty and refuses every operation.
    cudyn::DeviceBuffer<std::uint32_t> moved = std::move(*buffer);
    CHECK(buffer->empty());
    CHECK(buffer->device_address() == 0);
    CHECK(buffer->size() == 0);
    CHECK_FALSE(moved.empty());
    require_error(buffer->copy_from(host), ErrorCode::InvalidArgument, "moved from");
    require_error(buffer->copy_to(host), ErrorCode::InvalidArgument, "moved from");
    require_error(buffer->set_bytes(0), ErrorCode::InvalidArgument, "moved from");
    require_error(buffer->fill(1u), ErrorCode::InvalidArgument, "moved from");
    require_error(buffer->copy_from(moved), ErrorCode::InvalidArgument, "moved from");
    require_error(moved.copy_from(*buffer), ErrorCode::InvalidArgument, "source is empty");
    CHECK(buffer->free().has_value());  // freeing an empty buffer is a no-op

    bigger->free().value();
    CHECK(bigger->empty());
    // Everything above was refused before any driver call; the one real
    // allocation (bigger) is gone again.
    CHECK(before.calls_since("cuMemAlloc_v2") == 1);
    CHECK(before.calls_since("cuMemcpyHtoD_v2") == 0);
    CHECK(before.calls_since("cuMemcpyDtoH_v2") == 0);
    CHECK(before.calls_since("cuMemcpyDtoD_v2") == 0);
    CHECK(before.calls_since("cuMemsetD8_v2") == 0);
    CHECK(before.calls_since("cuMemsetD32_v2") == 0);
    CHECK(before.calls_since("cuMemcpyHtoDAsync_v2") == 0);
    CHECK(before.live_delta() == 0);
}

TEST_CASE("DeviceBuffer: driver failures leak nothing; free() reports; destructors stay silent",
          "[emulated][cuda11][legacy][device-buffer]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto context = activate(0);
    require_faults_leave_nothing({"cuMemAlloc_v2"}, [] { return cudyn::DeviceBuffer<double>::allocate(64); });
    {
        ScopedFault fault("cuMemAlloc_v2");  // default: CUDA_ERROR_OUT_OF_MEMORY
        require_error(cudyn::DeviceBuffer<double>::allocate(64), ErrorCode::OutOfMemory, "cuMemAlloc_v2");
    }

    const DriverSnapshot before;
    auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(8);
    REQUIRE(buffer.has_value());
    const CUdeviceptr address = buffer->device_address();
    {
        ScopedFault fault("cuMemFree_v2:1:CUDA_ERROR_INVALID_VALUE");
        auto freed = buffer->free();
        REQUIRE_FALSE(freed.has_value());
        CHECK(freed.error().entry_point == "cuMemFree_v2");
        // Still the owner (the driver still holds the memory): unchanged, and free() can be retried.
        CHECK_FALSE(buffer->empty());
        CHECK(buffer->device_address() == address);
    }
    CHECK(before.live_delta() == 1);
    REQUIRE(buffer->free().has_value());
    CHECK(buffer->empty());
    CHECK(before.live_delta() == 0);

    // Exit-time destruction: the driver answers CUDA_ERROR_DEINITIALIZED to
    // everything; the destructor stays silent and lets go.
    auto dying = cudyn::DeviceBuffer<std::uint32_t>::allocate(8);
    REQUIRE(dying.has_value());
    const CUdeviceptr dying_address = dying->device_address();
    const long asked = fake.call_count("cuCtxGetCurrent") + fake.call_count("cuMemFree_v2");
    fake.set_deinitialized(true);
    { cudyn::DeviceBuffer<std::uint32_t> last = std::move(*dying); }
    fake.set_deinitialized(false);
    CHECK(fake.call_count("cuCtxGetCurrent") + fake.call_count("cuMemFree_v2") > asked);  // it did try
    REQUIRE(cudyn::call_driver(&cudyn::DriverTable::cuMemFree_v3020, dying_address).has_value());
    CHECK(before.live_delta() == 0);
}

// --- PinnedBuffer ----------------------------------------------------------------------

TEST_CASE("PinnedBuffer: host memory the device copies from, flags as asked",
          "[emulated][cuda11][legacy][pinned]") {
    auto context = activate(0);
    CHECK(cudyn::PinnedFlags{}.to_cu() == 0u);  // write-combined is never the default
    CHECK(cudyn::PinnedFlags{true, true, true}.to_cu() ==
          unsigned{CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED});
    CHECK(cudyn::PinnedFlags{false, false, true}.to_cu() == unsigned{CU_MEMHOSTALLOC_WRITECOMBINED});

    const DriverSnapshot before;
    {
        auto pinned = cudyn::PinnedBuffer<std::uint32_t>::allocate(256);
        REQUIRE(pinned.has_value());
        CHECK(pinned->size() == 256);
        CHECK_FALSE(pinned->flags().write_combined);
        CHECK(before.live_delta() == 1);
        for (std::size_t i = 0; i < pinned->size(); ++i) (*pinned)[i] = static_cast<std::uint32_t>(i * 3);

        auto device = cudyn::DeviceBuffer<std::uint32_t>::allocate(256);
        REQUIRE(device.has_value());
        REQUIRE(device->copy_from(pinned->span()).has_value());
        auto back = cudyn::PinnedBuffer<std::uint32_t>::allocate(256, cudyn::PinnedFlags{true, false, false});
        REQUIRE(back.has_value());
        CHECK(back->flags().portable);
        REQUIRE(device->copy_to(back->span()).has_value());
        CHECK(std::equal(back->begin(), back->end(), pinned->begin()));

        auto attributes = cudyn::pointer_attributes(pinned->data());
        REQUIRE(attributes.has_value());
        CHECK(attributes->memory_type == cudyn::MemoryType::Host);
        CHECK(attributes->host_address == pinned->data());
        CHECK(attributes->range_size_bytes == pinned->size_bytes());

        cudyn::PinnedBuffer<std::uint32_t> moved = std::move(*pinned);
        CHECK(pinned->data() == nullptr);
        CHECK(pinned->span().empty());
        CHECK(moved.size() == 256);
        CHECK(before.live_delta() == 3);
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("PinnedBuffer: bad sizes and driver failures leak nothing", "[emulated][cuda11][legacy][pinned]") {
    auto context = activate(0);
    const DriverSnapshot before({"cuMemHostAlloc"});
    require_error(cudyn::PinnedBuffer<std::uint32_t>::allocate(0), ErrorCode::InvalidArgument,
                  "count must be non-zero");
    require_error(cudyn::PinnedBuffer<std::uint32_t>::allocate(kHuge), ErrorCode::InvalidArgument, "overflows");
    before.require_untouched();
    require_faults_leave_nothing({"cuMemHostAlloc"}, [] { return cudyn::PinnedBuffer<char>::allocate(100); });
}

// --- ZeroCopyBuffer ---------------------------------------------------------------------------

TEST_CASE("ZeroCopyBuffer: host writes are what the device reads, and back", "[emulated][cuda11][legacy][mapped]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        auto mapped = cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(64);
        REQUIRE(mapped.has_value());
        CHECK(mapped->flags().device_mapped);
        CHECK_FALSE(mapped->flags().write_combined);
        CHECK(mapped->device_address() != 0);
        CHECK(before.live_delta() == 1);
        for (std::size_t i = 0; i < 64; ++i) mapped->span()[i] = static_cast<std::uint32_t>(1000 + i);
        CHECK(read_device(mapped->device_address(), 64) == iota_vector(64, 1000));
        // A device-side write lands in the host's view.
        REQUIRE(cudyn::call_driver(&cudyn::DriverTable::cuMemsetD32_v3020, mapped->device_address(), 77u,
                                   std::size_t{64})
                    .has_value());
        CHECK((*mapped)[0] == 77u);
        CHECK((*mapped)[63] == 77u);

        auto attributes = cudyn::pointer_attributes(mapped->device_address());
        REQUIRE(attributes.has_value());
        CHECK(attributes->device_address == mapped->device_address());
        CHECK(attributes->host_address == mapped->data());

        auto portable = cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(8, cudyn::PinnedFlags{true, false, false});
        REQUIRE(portable.has_value());
        CHECK(portable->flags().portable);
        CHECK(portable->flags().device_mapped);
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("ZeroCopyBuffer: NotSupported without CAN_MAP_HOST_MEMORY, checked before allocating",
          "[emulated][cuda11][legacy][mapped]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto context = activate(0);
    const DriverSnapshot before({"cuMemHostAlloc", "cuMemHostGetDevicePointer_v2"});
    fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 0);
    auto refused = cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(64);
    fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1);
    require_error(refused, ErrorCode::NotSupported, "CAN_MAP_HOST_MEMORY");
    CHECK(refused.error().message.find("device 0") != std::string::npos);
    before.require_untouched();

    // Device 1 may map even when device 0 cannot: the current context decides.
    fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 0);
    {
        auto other = activate(1);
        auto mapped = cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(4);
        CHECK(mapped.has_value());
    }
    fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1);
    REQUIRE(context.make_current().has_value());
}

TEST_CASE("ZeroCopyBuffer: bad input and a failure of each driver call leak nothing",
          "[emulated][cuda11][legacy][mapped]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto context = activate(0);
    const DriverSnapshot before({"cuCtxGetDevice", "cuMemHostAlloc"});
    require_error(cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(0), ErrorCode::InvalidArgument,
                  "count must be non-zero");
    require_error(cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(kHuge), ErrorCode::InvalidArgument, "overflows");
    before.require_untouched();

    const long host_frees = fake.call_count("cuMemFreeHost");
    require_faults_leave_nothing(
        {"cuCtxGetDevice", "cuDeviceGetAttribute", "cuMemHostAlloc", "cuMemHostGetDevicePointer_v2"},
        [] { return cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(64); });
    // The device-pointer failure came after the allocation: it was freed again.
    CHECK(fake.call_count("cuMemFreeHost") == host_frees + 1);

    auto mapped = cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(4);
    REQUIRE(mapped.has_value());
    cudyn::ZeroCopyBuffer<std::uint32_t> moved = std::move(*mapped);
    CHECK(mapped->device_address() == 0);
    CHECK(mapped->data() == nullptr);
    CHECK(moved.device_address() != 0);
}

// --- HostRegistration ---------------------------------------------------------------------------

TEST_CASE("HostRegistration: caller memory registered, mapped, unregistered on destruction",
          "[emulated][cuda11][legacy][register]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto context = activate(0);
    std::vector<std::uint32_t> memory = iota_vector(512, 3);
    const DriverSnapshot before({"cuMemHostUnregister"});
    {
        auto plain = cudyn::HostRegistration::register_span(cudyn::HostSpan<std::uint32_t>(memory));
        REQUIRE(plain.has_value());
        CHECK(plain->host_address() == memory.data());
        CHECK(plain->size_bytes() == memory.size() * 4);
        CHECK(plain->device_address() == 0);  // not device_mapped
        CHECK(before.live_delta() == 1);
        auto attributes = cudyn::pointer_attributes(memory.data());
        REQUIRE(attributes.has_value());
        CHECK(attributes->memory_type == cudyn::MemoryType::Host);
    }
    CHECK(before.live_delta() == 0);
    CHECK(before.calls_since("cuMemHostUnregister") == 1);

    cudyn::HostRegisterFlags mapped_flags;
    mapped_flags.device_mapped = true;
    CHECK(mapped_flags.to_cu() == unsigned{CU_MEMHOSTREGISTER_DEVICEMAP});
    {
        // The device may use the host address itself...
        auto same = cudyn::HostRegistration::register_memory(memory.data(), memory.size() * 4, mapped_flags);
        REQUIRE(same.has_value());
        CHECK(same->device_address() == static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(memory.data())));
        CHECK(read_device(same->device_address(), 512) == memory);
    }
    fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 0);
    {
        // ...or only a different one: device_address() is what it must be given.
        auto aliased = cudyn::HostRegistration::register_memory(memory.data(), memory.size() * 4, mapped_flags);
        REQUIRE(aliased.has_value());
        CHECK(aliased->device_address() != 0);
        CHECK(aliased->device_address() != static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(memory.data())));
        CHECK(read_device(aliased->device_address(), 512) == memory);
        memory[5] = 12345;
        CHECK(read_device(aliased->device_address() + 5 * 4, 1) == std::vector<std::uint32_t>{12345});

        cudyn::HostRegistration moved = std::move(*aliased);
        CHECK(aliased->empty());
        CHECK(aliased->device_address() == 0);
        CHECK(aliased->unregister().has_value());  // no-op when empty
        REQUIRE(moved.unregister().has_value());
        CHECK(moved.empty());
    }
    fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 1);
    CHECK(before.live_delta() == 0);
}

TEST_CASE("HostRegistration: bad input, unsupported mapping and driver failures leak nothing",
          "[emulated][cuda11][legacy][register]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto context = activate(0);
    std::vector<std::uint32_t> memory(64, 9);
    const DriverSnapshot before({"cuMemHostRegister_v2"});
    require_error(cudyn::HostRegistration::register_memory(nullptr, 64), ErrorCode::InvalidArgument,
                  "data is a null pointer");
    require_error(cudyn::HostRegistration::register_memory(memory.data(), 0), ErrorCode::InvalidArgument,
                  "bytes must be non-zero");
    require_error(cudyn::HostRegistration::register_span(cudyn::HostSpan<std::uint32_t>()), ErrorCode::InvalidArgument,
                  "null pointer");

    cudyn::HostRegisterFlags mapped_flags;
    mapped_flags.device_mapped = true;
    fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 0);
    auto refused = cudyn::HostRegistration::register_memory(memory.data(), 256, mapped_flags);
    fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1);
    require_error(refused, ErrorCode::NotSupported, "CAN_MAP_HOST_MEMORY");
    before.require_untouched();

    const long unregisters = fake.call_count("cuMemHostUnregister");
    require_faults_leave_nothing(
        {"cuCtxGetDevice", "cuDeviceGetAttribute", "cuMemHostRegister_v2", "cuMemHostGetDevicePointer_v2"},
        [&] { return cudyn::HostRegistration::register_memory(memory.data(), 256, mapped_flags); });
    CHECK(fake.call_count("cuMemHostUnregister") == unregisters + 1);

    // Registering the same memory twice is the driver's error, reported as such.
    auto first = cudyn::HostRegistration::register_memory(memory.data(), 256);
    REQUIRE(first.has_value());
    auto twice = cudyn::HostRegistration::register_memory(memory.data(), 256);
    REQUIRE_FALSE(twice.has_value());
    CHECK(twice.error().driver_result == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CHECK(before.live_delta() == 1);
}

// --- memory information ---------------------------------------------------------------------

TEST_CASE("memory info: free and total per device, with the context made explicit",
          "[emulated][cuda11][legacy][meminfo]") {
    auto context0 = activate(0);
    auto info0 = cudyn::current_device_memory_info();
    REQUIRE(info0.has_value());
    CHECK(info0->device == 0);
    CHECK(info0->total_bytes == std::size_t{80} << 30);
    CHECK(info0->free_bytes <= info0->total_bytes);

    auto buffer = cudyn::DeviceBuffer<char>::allocate(std::size_t{1} << 20);
    REQUIRE(buffer.has_value());
    auto after = cudyn::current_device_memory_info();
    REQUIRE(after.has_value());
    CHECK(after->free_bytes == info0->free_bytes - (std::size_t{1} << 20));

    // Device 1's numbers through its own context; device 0's stays current.
    auto device1 = cudyn::Device::get(1);
    REQUIRE(device1.has_value());
    auto context1 = cudyn::PrimaryContext::retain(*device1);
    REQUIRE(context1.has_value());
    auto info1 = cudyn::device_memory_info(*context1);
    REQUIRE(info1.has_value());
    CHECK(info1->device == 1);
    const auto bytes_in_use =
        reinterpret_cast<PFN_fakecuda_device_bytes_in_use>(FakeDriver::loaded().symbol("fakecuda_device_bytes_in_use"));
    REQUIRE(bytes_in_use != nullptr);
    CHECK(info1->free_bytes == info1->total_bytes - bytes_in_use(1));
    CHECK(after->free_bytes == after->total_bytes - bytes_in_use(0));
    CHECK(bytes_in_use(0) >= (std::size_t{1} << 20));
    CUcontext current = nullptr;
    REQUIRE(cudyn::call_driver(&cudyn::DriverTable::cuCtxGetCurrent_v4000, &current).has_value());
    CHECK(current == context0.handle());
    auto same = cudyn::device_memory_info(context0);
    REQUIRE(same.has_value());
    CHECK(same->free_bytes == after->free_bytes);

    // A failed query still puts the previous context back.
    {
        ScopedFault fault("cuMemGetInfo_v2");
        auto failed = cudyn::device_memory_info(*context1);
        REQUIRE_FALSE(failed.has_value());
        CHECK(failed.error().entry_point == "cuMemGetInfo_v2");
    }
    REQUIRE(cudyn::call_driver(&cudyn::DriverTable::cuCtxGetCurrent_v4000, &current).has_value());
    CHECK(current == context0.handle());

    cudyn::PrimaryContext moved = std::move(*context1);
    require_error(cudyn::device_memory_info(*context1), ErrorCode::InvalidArgument, "context is empty");

    // No current context: the driver's answer, not a guess.
    REQUIRE(cudyn::call_driver(&cudyn::DriverTable::cuCtxSetCurrent_v4000, CUcontext{nullptr}).has_value());
    auto none = cudyn::current_device_memory_info();
    REQUIRE(context0.make_current().has_value());
    REQUIRE_FALSE(none.has_value());
    CHECK(none.error().driver_result == CUDA_ERROR_INVALID_CONTEXT);
}

TEST_CASE("pointer attributes: type, device, managed, allocation range", "[emulated][cuda11][legacy][meminfo]") {
    auto context0 = activate(0);
    auto device = cudyn::DeviceBuffer<std::uint32_t>::allocate(100);
    REQUIRE(device.has_value());
    auto inside = cudyn::pointer_attributes(device->device_address() + 40);
    REQUIRE(inside.has_value());
    CHECK(inside->known());
    CHECK(inside->memory_type == cudyn::MemoryType::Device);
    CHECK(inside->device_ordinal == 0);
    CHECK_FALSE(inside->is_managed);
    CHECK(inside->range_base == device->device_address());
    CHECK(inside->range_size_bytes == device->size_bytes());
    CHECK(inside->device_address == device->device_address() + 40);
    CHECK(inside->context == context0.handle());

    auto managed = cudyn::ManagedBuffer<std::uint32_t>::allocate(10);
    REQUIRE(managed.has_value());
    auto managed_attributes = cudyn::pointer_attributes(managed->device_address());
    REQUIRE(managed_attributes.has_value());
    CHECK(managed_attributes->is_managed);
    CHECK(managed_attributes->range_size_bytes == managed->size_bytes());

    {
        auto context1 = activate(1);
        auto on_device1 = cudyn::DeviceBuffer<std::uint32_t>::allocate(4);
        REQUIRE(on_device1.has_value());
        auto attributes1 = cudyn::pointer_attributes(on_device1->device_address());
        REQUIRE(attributes1.has_value());
        CHECK(attributes1->device_ordinal == 1);
    }
    REQUIRE(context0.make_current().has_value());

    // Ordinary host memory is not an error: the driver does not know it.
    int local = 0;
    auto unknown = cudyn::pointer_attributes(&local);
    REQUIRE(unknown.has_value());
    CHECK_FALSE(unknown->known());
    CHECK(unknown->device_ordinal == -1);
    CHECK(std::string(cudyn::to_string(unknown->memory_type)) == "unknown");

    ScopedFault fault("cuPointerGetAttributes");
    auto failed = cudyn::pointer_attributes(device->device_address());
    REQUIRE_FALSE(failed.has_value());
    CHECK(failed.error().entry_point == "cuPointerGetAttributes");
}
