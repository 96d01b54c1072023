// Teardown while work may still use the memory ([teardown], emulated fake).
//
// The fake models what an H100 showed: cuMemUnmap does not wait, and work
// that finds its memory gone fails the context (CUDA_ERROR_ILLEGAL_ADDRESS,
// for good); cuMemFree, cuMemFreeHost, cuMemHostUnregister wait for the
// context's work. The first cases show the hazard on the raw driver, so the
// rest are evidence: cudyn's owners wait (Teardown::WaitForDevice) and leave
// the context healthy, and Teardown::CallerSynchronized really skips the wait.
//
// A failed context stays failed until its last reference goes: each case
// that fails one lets every owner go before it ends.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/vmm/growable_buffer.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/device/stream.hpp"

#include <cstdint>
#include <utility>
#include <vector>

using cudyn::AccessFlags;
using cudyn::AllocationProperties;
using cudyn::DriverTable;
using cudyn::GrowableBuffer;
using cudyn::Location;
using cudyn::Stream;
using cudyn::Teardown;
using cudyn::call_driver;
using namespace cudyn_test;  // FakeDriver, ScopedStreamDelay, activate, take, require_ok, kMiB

namespace {

constexpr unsigned kSlow = 50'000;  // us before each piece of stream work starts
constexpr std::uint32_t kStamp = 0xC0FFEE00u;

int context_error() { return FakeDriver::loaded().context_error(0); }

Stream non_blocking_stream() { return take(Stream::create(false)); }

// A fill of all of [address, address + bytes) on `stream`, still pending when this returns.
void pending_fill(CUdeviceptr address, std::size_t bytes, std::uint32_t value, const Stream& stream) {
    require_ok(call_driver(&DriverTable::cuMemsetD32Async_v3020, address, value, bytes / 4, stream.handle()));
    REQUIRE(FakeDriver::loaded().pending_work() > 0);
}

}  // namespace

TEST_CASE("the fake models the hazard: unmapping under pending work fails the context", "[emulated][teardown]") {
    {
        auto context = activate(0);
        auto range = take(cudyn::AddressRange::reserve(2 * kMiB));
        auto memory = take(cudyn::PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB));
        auto mapping = take(cudyn::MappedRange::map(range, 0, memory, {{Location::device(0), AccessFlags::ReadWrite}}));
        const Stream stream = non_blocking_stream();
        const ScopedStreamDelay slow(kSlow);
        pending_fill(mapping.device_address(), 2 * kMiB, kStamp, stream);
        // The raw unmap, as a program without cudyn's wait would do it.
        mapping.set_teardown(Teardown::CallerSynchronized);
        require_ok(mapping.unmap());
        const auto synchronized = call_driver(&DriverTable::cuCtxSynchronize_v2000);
        REQUIRE_FALSE(synchronized.has_value());
        CHECK(synchronized.error().driver_result == CUDA_ERROR_ILLEGAL_ADDRESS);
        CHECK(context_error() == CUDA_ERROR_ILLEGAL_ADDRESS);
        // Sticky: everything that uses the context fails now.
        CHECK(cudyn::DeviceBuffer<int>::allocate(1).error().driver_result == CUDA_ERROR_ILLEGAL_ADDRESS);
    }
    // The last reference went: the context was destroyed, a new one is healthy.
    CHECK(context_error() == 0);
    auto context = activate(0);
    CHECK(cudyn::DeviceBuffer<int>::allocate(1).has_value());
}

TEST_CASE("the issue's reproduction: grow, fill, destroy leaves the context healthy", "[emulated][teardown]") {
    auto context = activate(0);
    const DriverSnapshot before;
    const ScopedStreamDelay slow(kSlow);
    {
        auto buffer = take(GrowableBuffer::create(AllocationProperties::device(0), 64 * kMiB));
        require_ok(buffer.grow_to(8 * kMiB));
        auto words = take(buffer.device_span_as<std::uint32_t>());
        require_ok(words.fill(kStamp));  // synchronous: done when it returns
        CHECK(FakeDriver::loaded().pending_work() == 0);
    }
    {
        // The same with the fill still pending on a non-blocking stream: the
        // destructor waits for it before it unmaps.
        const Stream stream = non_blocking_stream();
        auto buffer = take(GrowableBuffer::create(AllocationProperties::device(0), 64 * kMiB));
        require_ok(buffer.grow_to(8 * kMiB));
        auto words = take(buffer.device_span_as<std::uint32_t>());
        require_ok(words.fill(kStamp, stream));
        REQUIRE(FakeDriver::loaded().pending_work() > 0);
    }
    CHECK(FakeDriver::loaded().pending_work() == 0);
    CHECK(context_error() == 0);
    require_ok(call_driver(&DriverTable::cuCtxSynchronize_v2000));
    CHECK(before.live_delta() == 0);
}

TEST_CASE("GrowableBuffer: shrink and release wait; the saved bytes include pending work", "[emulated][teardown]") {
    auto context = activate(0);
    const Stream stream = non_blocking_stream();
    const ScopedStreamDelay slow(kSlow);
    auto buffer = take(GrowableBuffer::create(AllocationProperties::device(0), 64 * kMiB));
    require_ok(buffer.grow_to(6 * kMiB));
    require_ok(buffer.device_span_as<std::uint32_t>()->fill(1u));

    // Work on the last chunk still pending: shrink_to waits for it, the first
    // chunks keep their bytes.
    pending_fill(buffer.device_address() + 4 * kMiB, 2 * kMiB, 2u, stream);
    require_ok(buffer.shrink_to(4 * kMiB));
    CHECK(context_error() == 0);
    CHECK(all_equal(buffer.device_address(), 4 * kMiB, 1u));

    // A fill pending when release_physical(Save) starts is in what it saved.
    pending_fill(buffer.device_address(), 4 * kMiB, 3u, stream);
    require_ok(buffer.release_physical(GrowableBuffer::Contents::Save));
    CHECK(context_error() == 0);
    require_ok(buffer.restore());
    CHECK(all_equal(buffer.device_address(), 4 * kMiB, 3u));

    // CallerSynchronized: the caller waits itself, then cudyn unmaps at once.
    buffer.set_teardown(Teardown::CallerSynchronized);
    pending_fill(buffer.device_address(), 4 * kMiB, 4u, stream);
    require_ok(stream.synchronize());
    require_ok(buffer.shrink_to(2 * kMiB));
    CHECK(context_error() == 0);
    CHECK(all_equal(buffer.device_address(), 2 * kMiB, 4u));
}

TEST_CASE("MappedRange waits for work on every device it granted access to", "[emulated][teardown]") {
    auto on_zero = activate(0);
    auto range = take(cudyn::AddressRange::reserve(2 * kMiB));
    auto memory = take(cudyn::PhysicalMemory::create(AllocationProperties::device(0), 2 * kMiB));
    auto mapping = take(cudyn::MappedRange::map(
        range, 0, memory, {{Location::device(0), AccessFlags::ReadWrite}, {Location::device(1), AccessFlags::ReadWrite}}));
    CHECK(mapping.teardown() == Teardown::WaitForDevice);
    const ScopedStreamDelay slow(kSlow);
    {
        // Device 1's work on the mapping, pending, from its own context.
        auto on_one = activate(1);
        const Stream stream = non_blocking_stream();
        pending_fill(mapping.device_address(), 2 * kMiB, kStamp, stream);
        require_ok(on_zero.make_current());
        require_ok(mapping.unmap());  // from device 0's context
        CHECK(FakeDriver::loaded().pending_work() == 0);
        CHECK(FakeDriver::loaded().context_error(1) == 0);
        require_ok(on_one.make_current());
    }
    require_ok(on_zero.make_current());
    CHECK(context_error() == 0);
}

TEST_CASE("owners whose driver release waits: freeing under pending work is safe", "[emulated][teardown]") {
    auto context = activate(0);
    const DriverSnapshot before;
    const Stream stream = non_blocking_stream();
    const ScopedStreamDelay slow(kSlow);
    {
        // A copy out of pinned memory pending when the pinned buffer goes:
        // cuMemFreeHost waits, the copy reads the bytes it was given.
        auto device = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
        {
            auto pinned = take(cudyn::PinnedBuffer<std::uint32_t>::allocate(1024));
            for (std::uint32_t& word : pinned) word = kStamp;
            require_ok(device.copy_from(pinned.span(), stream));
        }
        CHECK(context_error() == 0);
        CHECK(all_equal(device.device_address(), 4096, kStamp));
        // A fill pending when the device buffer is freed: cuMemFree waits.
        require_ok(device.fill(1u, stream));
        require_ok(device.free());
        CHECK(FakeDriver::loaded().pending_work() == 0);
    }
    CHECK(context_error() == 0);
    CHECK(before.live_delta() == 0);
}
