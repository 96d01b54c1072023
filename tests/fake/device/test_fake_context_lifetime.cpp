// Owners keep their context ([context-lifetime], emulated fake).
//
// Releasing a primary context's last reference destroys everything in it, and
// the next allocation may get the same address back (the fake's mmap reuses
// ranges as the real driver reuses addresses). An owner that outlived its
// context would then free someone else's memory. cudyn's owners hold a retain
// of their context and release into it, whatever context (or none) is current
// on the thread that destroys them.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/share/ipc_event.hpp"
#include "cudyn/memory/zero_copy_buffer.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/memory/managed_buffer.hpp"
#include "cudyn/memory/memory_info.hpp"

#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

using cudyn::DeviceBuffer;
using cudyn::DriverTable;
using cudyn::call_driver;
using namespace cudyn_test;  // FakeDriver, activate, take, require_ok, DriverSnapshot

namespace {

CUcontext current_context() {
    CUcontext context = nullptr;
    require_ok(call_driver(&DriverTable::cuCtxGetCurrent_v4000, &context));
    return context;
}

}  // namespace

TEST_CASE("a buffer that outlives the program's context frees only its own memory", "[emulated][context-lifetime]") {
    const FakeDriver& fake = FakeDriver::loaded();
    const DriverSnapshot before;
    const int baseline = fake.primary_ctx_refcount(0);
    {
        auto context = activate(0);
        auto stale = take(DeviceBuffer<std::uint32_t>::allocate(1024));
        require_ok(stale.fill(1u));
        const CUdeviceptr stale_address = stale.device_address();
        // The program lets its context go: the buffer's retain keeps it alive
        // (without it, the context and the buffer's memory would be gone, and
        // the allocation below could get the same address back).
        require_ok(context.release());
        CHECK(fake.primary_ctx_refcount(0) == baseline + 1);
        // The program takes the device's context again: the buffer's memory
        // is still there, with its bytes.
        auto again = activate(0);
        CHECK(read_device(stale_address, 1024) == std::vector<std::uint32_t>(1024, 1u));
        auto fresh = take(DeviceBuffer<std::uint32_t>::allocate(1024));
        require_ok(fresh.fill(2u));
        // The stale buffer's free releases its own allocation and nothing
        // else, wherever the allocator put the two: one allocation fewer, its
        // address no longer known, the fresh buffer's bytes intact.
        const long live = fake.live_allocations();
        require_ok(stale.free());
        CHECK(fake.live_allocations() == live - 1);
        CHECK_FALSE(take(cudyn::pointer_attributes(stale_address)).known());
        CHECK(read_device(fresh.device_address(), 1024) == std::vector<std::uint32_t>(1024, 2u));
        require_ok(fresh.copy_from(iota_vector(1024, 5)));
        CHECK(read_device(fresh.device_address(), 1024) == iota_vector(1024, 5));
        // The program's new PrimaryContext shares the retain the stale buffer keeps.
        CHECK(fake.primary_ctx_refcount(0) == baseline + 1);
    }
    // The last owner gone, the retain went with it.
    CHECK(fake.primary_ctx_refcount(0) == baseline);
    CHECK(before.live_delta() == 0);
}

TEST_CASE("owners created in one context share one retain of it", "[emulated][context-lifetime]") {
    const FakeDriver& fake = FakeDriver::loaded();
    const int baseline = fake.primary_ctx_refcount(0);
    {
        auto context = activate(0);
        CHECK(fake.primary_ctx_refcount(0) == baseline + 1);
        const long retains = fake.call_count("cuDevicePrimaryCtxRetain");
        auto a = take(DeviceBuffer<float>::allocate(16));
        auto b = take(cudyn::PinnedBuffer<float>::allocate(16));
        auto c = take(cudyn::ManagedBuffer<float>::allocate(16));
        auto stream = take(cudyn::Stream::create());
        auto event = take(cudyn::IpcEvent::create());
        // They share the program's retain: no retain of their own, no driver call for one.
        CHECK(fake.primary_ctx_refcount(0) == baseline + 1);
        CHECK(fake.call_count("cuDevicePrimaryCtxRetain") == retains);
        // The program lets go first: the owners keep the context.
        require_ok(context.release());
        CHECK(fake.primary_ctx_refcount(0) == baseline + 1);
    }
    CHECK(fake.primary_ctx_refcount(0) == baseline);
}

// Owners made one after another in one context share the retain through the
// thread's cache (no lock, no driver call); the cache holds it weakly, so it
// keeps nothing alive, and a retain given back is never handed out again.
TEST_CASE("the retain a thread shared last is shared again, and kept alive only by owners",
          "[emulated][context-lifetime]") {
    const FakeDriver& fake = FakeDriver::loaded();
    const int baseline = fake.primary_ctx_refcount(0);
    const long retains = fake.call_count("cuDevicePrimaryCtxRetain");
    {
        auto context = activate(0);
        auto first = take(DeviceBuffer<float>::allocate(16));
        // The program's explicit release is not the last reference: the buffer keeps the context.
        require_ok(context.release());
        CHECK(fake.primary_ctx_refcount(0) == baseline + 1);
        auto second = take(DeviceBuffer<float>::allocate(16));
        CHECK(fake.primary_ctx_refcount(0) == baseline + 1);
        CHECK(fake.call_count("cuDevicePrimaryCtxRetain") == retains + 1);
        require_ok(first.free());
        CHECK(fake.primary_ctx_refcount(0) == baseline + 1);  // `second` still holds it
    }
    // The last owner gone, the retain went: the thread's cache did not keep it.
    CHECK(fake.primary_ctx_refcount(0) == baseline);
    {
        // The same context taken again: owners share the new retain, not the old one.
        auto context = activate(0);
        CHECK(fake.primary_ctx_refcount(0) == baseline + 1);
        auto third = take(DeviceBuffer<float>::allocate(16));
        require_ok(context.release());
        CHECK(fake.primary_ctx_refcount(0) == baseline + 1);
        require_ok(third.fill(1.0f));
    }
    CHECK(fake.primary_ctx_refcount(0) == baseline);
}

TEST_CASE("owners release into their own context, from any thread, whatever is current there",
          "[emulated][context-lifetime]") {
    const FakeDriver& fake = FakeDriver::loaded();
    const DriverSnapshot before;
    const long streams = fake.live_streams();
    const long events = fake.live_events();
    {
        auto on_zero = activate(0);
        auto device = take(DeviceBuffer<std::uint32_t>::allocate(256));
        auto pinned = take(cudyn::PinnedBuffer<std::uint32_t>::allocate(256));
        auto mapped = take(cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(256));
        auto managed = take(cudyn::ManagedBuffer<std::uint32_t>::allocate(256));
        auto stream = take(cudyn::Stream::create());
        auto event = take(cudyn::IpcEvent::create());
        CHECK(before.live_delta() == 4);  // the four allocations

        // A thread with no context current destroys half of them...
        std::thread bare([&] {
            CHECK(current_context() == nullptr);
            require_ok(device.free());
            require_ok(pinned.free());
            require_ok(stream.destroy());
            CHECK(current_context() == nullptr);  // nothing left bound
        });
        bare.join();
        // ...and this one, with device 1's context current, the other half.
        auto on_one = activate(1);
        const CUcontext one = current_context();
        require_ok(mapped.free());
        require_ok(managed.free());
        require_ok(event.destroy());
        CHECK(current_context() == one);  // put back
        CHECK(before.live_delta() == 0);
        CHECK(fake.live_streams() == streams);
        CHECK(fake.live_events() == events);
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("a stream stays usable after the program released its context", "[emulated][context-lifetime]") {
    const FakeDriver& fake = FakeDriver::loaded();
    const int baseline = fake.primary_ctx_refcount(0);
    auto context = activate(0);
    auto stream = take(cudyn::Stream::create());
    auto buffer = take(DeviceBuffer<std::uint32_t>::allocate(64));
    require_ok(context.release());
    require_ok(buffer.fill(3u, stream));
    require_ok(stream.synchronize());
    CHECK(take(stream.query()) == true);
    CHECK(read_device(buffer.device_address(), 64) == std::vector<std::uint32_t>(64, 3u));
    require_ok(stream.destroy());
    require_ok(buffer.free());
    CHECK(fake.primary_ctx_refcount(0) == baseline);
}
