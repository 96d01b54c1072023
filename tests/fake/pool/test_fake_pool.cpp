// Memory pools and stream-ordered buffers ([pool]) on the fakes that emulate
// them (emulated, cuda11) and on the one that has no pool entries (legacy):
// pool attributes, usage and trimming, access, the default and current
// pools, buffers allocated and freed in stream order (reuse of addresses, the
// free following the stream last used, the synchronous forms waiting), the
// context a buffer keeps, refused frees kept for a retry, and the refusals
// made before the driver.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/core/memory_ledger.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/copy_plan.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

using cudyn::AccessFlags;
using cudyn::ErrorCode;
using cudyn::HandleType;
using cudyn::Location;
using cudyn::MemoryPool;
using cudyn::PoolProperties;
using cudyn::PoolReuse;
using cudyn::StreamOrderedBuffer;
using namespace cudyn_test;  // FakeDriver, activate, take, require_ok, require_error, DriverSnapshot

namespace {

constexpr std::size_t kWords = 1 << 18;  // 1 MiB of uint32_t

MemoryPool keeping_pool() {
    auto pool = take(MemoryPool::create(PoolProperties::device(0)));
    require_ok(pool.set_release_threshold(std::numeric_limits<std::uint64_t>::max()));
    return pool;
}

}  // namespace

TEST_CASE("a pool's attributes, usage, trimming and destruction", "[emulated][cuda11][pool]") {
    auto context = activate(0);
    auto pool = take(MemoryPool::create(PoolProperties::device(0)));
    CHECK(pool.owned());
    CHECK(pool.location() == Location::device(0));
    CHECK(take(pool.release_threshold()) == 0);
    // Each policy against the driver's own attribute, read raw: a round trip
    // through cudyn alone would pass with two policies swapped both ways.
    const std::pair<PoolReuse, CUmemPool_attribute> policies[] = {
        {PoolReuse::FollowEventDependencies, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES},
        {PoolReuse::AllowOpportunistic, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC},
        {PoolReuse::AllowInternalDependencies, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES},
    };
    const auto raw_reuse = [&](CUmemPool_attribute attribute) {
        int value = -1;
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemPoolGetAttribute_v11020, pool.handle(), attribute,
                                      static_cast<void*>(&value)));
        return value;
    };
    for (const auto& [policy, attribute] : policies) {
        INFO(cudyn::to_string(policy));
        CHECK(take(pool.reuse(policy)));
        require_ok(pool.set_reuse(policy, false));
        for (const auto& [other, other_attribute] : policies) CHECK(raw_reuse(other_attribute) == (other == policy ? 0 : 1));
        CHECK_FALSE(take(pool.reuse(policy)));
        int raw_on = 1;
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemPoolSetAttribute_v11020, pool.handle(), attribute,
                                      static_cast<void*>(&raw_on)));
        CHECK(take(pool.reuse(policy)));
    }
    require_ok(pool.set_release_threshold(64ull << 20));
    CHECK(take(pool.release_threshold()) == (64ull << 20));

    auto stream = take(cudyn::Stream::create());
    {
        auto a = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, stream));
        auto b = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, stream));
        const auto in_use = take(pool.usage());
        CHECK(in_use.used_bytes >= 2 * kWords * 4);
        CHECK(in_use.reserved_bytes >= in_use.used_bytes);
        CHECK(in_use.used_high_bytes >= in_use.used_bytes);
    }
    require_ok(stream.synchronize());
    const auto freed = take(pool.usage());
    CHECK(freed.used_bytes == 0);
    CHECK(freed.used_high_bytes >= 2 * kWords * 4);  // the mark stays until reset
    CHECK(freed.reserved_bytes > 0);                 // under the threshold: kept for reuse
    require_ok(pool.reset_high_water_marks());
    CHECK(take(pool.usage()).used_high_bytes == 0);

    require_ok(pool.trim_to(0));
    CHECK(take(pool.usage()).reserved_bytes == 0);
    require_ok(pool.destroy());
    CHECK(pool.empty());
    require_error(pool.usage(), ErrorCode::InvalidArgument, "the pool is empty");
}

TEST_CASE("a threshold of 0 gives freed memory back at the next synchronization", "[emulated][cuda11][pool]") {
    auto context = activate(0);
    auto pool = take(MemoryPool::create(PoolProperties::device(0)));
    auto stream = take(cudyn::Stream::create());
    auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, stream));
    require_ok(buffer.free());
    require_ok(stream.synchronize());
    CHECK(take(pool.usage()).reserved_bytes == 0);
}

TEST_CASE("stream-ordered buffers: bytes, the synchronous forms, and reuse in stream order",
          "[emulated][cuda11][pool]") {
    auto context = activate(0);
    auto pool = keeping_pool();
    auto stream = take(cudyn::Stream::create());
    ScopedStreamDelay slow(2000);

    auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, stream));
    CHECK(buffer.size() == kWords);
    CHECK(buffer.size_bytes() == kWords * 4);
    CHECK(buffer.stream() == stream.handle());
    // Synchronous: done when it returns, in the buffer's stream order.
    const auto values = iota_vector(kWords, 3);
    require_ok(buffer.copy_from(values));
    CHECK(FakeDriver::loaded().pending_work() == 0);
    CHECK(read_device(buffer.device_address(), kWords) == values);
    std::vector<std::uint32_t> back(kWords);
    require_ok(buffer.copy_to(back));
    CHECK(back == values);
    // On the stream: enqueued, done after a synchronize.
    require_ok(buffer.fill(9u, stream));
    require_ok(buffer.copy_to(back, stream));
    require_ok(stream.synchronize());
    CHECK(back == std::vector<std::uint32_t>(kWords, 9u));
    require_ok(buffer.device_span().subspan(0, 4)->set_bytes(0, stream));
    require_ok(stream.synchronize());
    CHECK(read_device(buffer.device_address(), 5) == std::vector<std::uint32_t>{0, 0, 0, 0, 9});

    // Freed on the stream, the next allocation of the same size on the same
    // stream may take the same memory at once: the pool reuses it in order.
    const CUdeviceptr address = buffer.device_address();
    require_ok(buffer.free());
    CHECK(buffer.empty());
    auto again = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, stream));
    CHECK(again.device_address() == address);
    require_ok(again.fill(1u));
    CHECK(read_device(again.device_address(), 1) == std::vector<std::uint32_t>{1u});
    CHECK(FakeDriver::loaded().context_error(0) == 0);
}

TEST_CASE("the free follows the stream the buffer was last used on", "[emulated][pool]") {
    auto context = activate(0);
    auto pool = keeping_pool();
    auto allocating = take(cudyn::Stream::create());
    auto working = take(cudyn::Stream::create());
    {
        ScopedStreamDelay slow(20000);
        auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, allocating));
        require_ok(allocating.synchronize());
        // A fill enqueued on another stream, 20 ms from running: the free
        // must wait for it, so it goes on that stream.
        require_ok(buffer.fill(5u, working));
        CHECK(buffer.stream() == working.handle());
    }  // the destructor frees it in stream order on `working`
    require_ok(working.synchronize());
    require_ok(allocating.synchronize());
    CHECK(FakeDriver::loaded().context_error(0) == 0);
    CHECK(take(pool.usage()).used_bytes == 0);
}

TEST_CASE("use_on records work the program enqueued itself; free(stream) names the stream",
          "[emulated][cuda11][pool]") {
    auto context = activate(0);
    auto pool = keeping_pool();
    auto first = take(cudyn::Stream::create());
    auto second = take(cudyn::Stream::create());
    auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, 256, first));
    buffer.use_on(second);
    CHECK(buffer.stream() == second.handle());
    auto other = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, 256, first));
    require_ok(other.free(second));
    CHECK(other.empty());
    require_ok(buffer.free());
    require_ok(second.synchronize());
    CHECK(take(pool.usage()).used_bytes == 0);
}

TEST_CASE("the current pool: cuMemAllocAsync, the default pool and set_current_for", "[emulated][cuda11][pool]") {
    auto context = activate(0);
    const auto device = take(cudyn::Device::get(0));
    const auto fallback = take(MemoryPool::default_for(device));
    CHECK_FALSE(fallback.owned());
    CHECK(take(MemoryPool::current_for(device)).handle() == fallback.handle());

    auto pool = keeping_pool();
    require_ok(pool.set_current_for(device));
    CHECK(take(MemoryPool::current_for(device)).handle() == pool.handle());
    {
        auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(kWords, cudyn::Stream::legacy_default()));
        require_ok(buffer.fill(4u));
        CHECK(take(pool.usage()).used_bytes >= kWords * 4);
    }
    require_ok(fallback.set_current_for(device));
    CHECK(take(MemoryPool::current_for(device)).handle() == fallback.handle());
    // A default pool is not destroyed: destroy() leaves it alone.
    auto not_owned = take(MemoryPool::default_for(device));
    require_ok(not_owned.destroy());
    CHECK(take(MemoryPool::current_for(device)).handle() == fallback.handle());

    const auto device1 = take(cudyn::Device::get(1));
    require_error(pool.set_current_for(device1), ErrorCode::InvalidArgument, "not on device 1");
}

TEST_CASE("pool access: the owner always, a peer when granted", "[emulated][cuda11][pool]") {
    auto context = activate(0);
    auto pool = keeping_pool();
    CHECK(take(pool.access(Location::device(0))) == AccessFlags::ReadWrite);
    require_error(pool.set_access({Location::device(0), AccessFlags::Read}), ErrorCode::InvalidArgument,
                  "always has read_write access");
    require_error(pool.set_access({Location::host(), AccessFlags::ReadWrite}), ErrorCode::InvalidArgument,
                  "granted to devices");
    require_error(pool.set_access({Location::device(7), AccessFlags::ReadWrite}), ErrorCode::InvalidArgument,
                  "is out of range");
    require_ok(pool.set_access({Location::device(1), AccessFlags::ReadWrite}));
    CHECK(take(pool.access(Location::device(1))) == AccessFlags::ReadWrite);
    require_ok(pool.set_access({Location::device(1), AccessFlags::None}));
    CHECK(take(pool.access(Location::device(1))) == AccessFlags::None);
}

TEST_CASE("a buffer keeps its context after the program released its own", "[emulated][cuda11][pool]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto stream = cudyn::Stream::legacy_default();
    StreamOrderedBuffer<std::uint32_t> buffer;
    {
        auto context = activate(0);
        buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(1024, stream));
        require_ok(buffer.fill(6u));
    }
    CHECK(fake.primary_ctx_refcount(0) >= 1);  // the buffer's retain
    require_ok(buffer.free());
    CHECK(fake.primary_ctx_refcount(0) == 0);
}

TEST_CASE("a refused free keeps the buffer for a retry", "[emulated][cuda11][pool]") {
    auto context = activate(0);
    auto pool = keeping_pool();
    auto stream = take(cudyn::Stream::create());
    auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, 1024, stream));
    const CUdeviceptr address = buffer.device_address();
    {
        ScopedFault refuse("cuMemFreeAsync:1+:CUDA_ERROR_UNKNOWN");
        require_error(buffer.free(), ErrorCode::Driver, "cuMemFreeAsync");
    }
    CHECK(buffer.device_address() == address);
    require_ok(buffer.fill(2u));
    require_ok(buffer.free());
    require_ok(stream.synchronize());
    CHECK(take(pool.usage()).used_bytes == 0);
}

// The common free runs in the caller's code; when the driver refuses it in a
// destructor, the buffer lets go after that one try (no second call), and its
// ledger entry goes with it.
TEST_CASE("a destructor whose free is refused tries once and lets go", "[emulated][cuda11][pool][ledger]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto context = activate(0);
    auto pool = keeping_pool();
    auto stream = take(cudyn::Stream::create());
    const auto live = [] { return cudyn::ledger::snapshot().of(cudyn::MemoryKind::StreamOrdered, 0).live_bytes; };
    const std::uint64_t before = live();
    CUdeviceptr address = 0;
    fake.reset_counts();
    {
        ScopedFault refuse("cuMemFreeAsync:1+:CUDA_ERROR_UNKNOWN");  // outlives the buffer
        auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, 1024, stream));
        address = buffer.device_address();
        CHECK(live() == before + 4096);
    }
    CHECK(fake.call_count("cuMemFreeAsync") == 1);
    CHECK(live() == before);
    // The driver still holds what the buffer let go of: given back here.
    REQUIRE(cudyn::driver().cuMemFreeAsync_v11020(address, stream.handle()) == CUDA_SUCCESS);
    require_ok(stream.synchronize());
    CHECK(take(pool.usage()).used_bytes == 0);
}

TEST_CASE("pool and buffer refusals made before the driver", "[emulated][cuda11][pool]") {
    auto context = activate(0);
    auto pool = keeping_pool();
    auto stream = take(cudyn::Stream::create());
    DriverSnapshot untouched({"cuMemAllocAsync", "cuMemAllocFromPoolAsync", "cuMemPoolCreate"});
    require_error(StreamOrderedBuffer<std::uint32_t>::allocate(pool, 0, stream), ErrorCode::InvalidArgument,
                  "StreamOrderedBuffer::allocate");
    require_error(StreamOrderedBuffer<std::uint64_t>::allocate(pool, std::numeric_limits<std::size_t>::max() / 4, stream),
                  ErrorCode::InvalidArgument, "StreamOrderedBuffer::allocate");
    require_error(StreamOrderedBuffer<std::uint32_t>::allocate(0, stream), ErrorCode::InvalidArgument,
                  "StreamOrderedBuffer::allocate");
    MemoryPool empty;
    require_error(StreamOrderedBuffer<std::uint32_t>::allocate(empty, 16, stream), ErrorCode::InvalidArgument,
                  "the pool is empty");
    require_error(MemoryPool::create(PoolProperties(Location::device(-1))), ErrorCode::InvalidArgument, "location");
    require_error(MemoryPool::create(PoolProperties::device(9)), ErrorCode::InvalidArgument, "is out of range");
    require_error(MemoryPool::create(PoolProperties(Location::host_numa_current())), ErrorCode::InvalidArgument,
                  "host NUMA current");
    require_error(MemoryPool::create(PoolProperties::device(0).with_handle_types(static_cast<HandleType>(0x100))),
                  ErrorCode::InvalidArgument, "unknown bits");
    untouched.require_untouched();

    StreamOrderedBuffer<std::uint32_t> moved_from = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, 16, stream));
    auto owner = std::move(moved_from);
    require_error(moved_from.fill(1u), ErrorCode::InvalidArgument, "is empty");
    require_ok(owner.free());
}

TEST_CASE("pools where the device has none or lacks the handle type", "[emulated][cuda11][pool]") {
    auto context = activate(0);
    const FakeDriver& fake = FakeDriver::loaded();
    auto stream = take(cudyn::Stream::create());
    {
        fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, 0);
        DriverSnapshot untouched({"cuMemPoolCreate"});
        require_error(MemoryPool::create(PoolProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor)),
                      ErrorCode::NotSupported, "MEMPOOL_SUPPORTED_HANDLE_TYPES");
        untouched.require_untouched();
        fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    }
    fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0);
    DriverSnapshot untouched({"cuMemPoolCreate", "cuMemAllocAsync", "cuDeviceGetDefaultMemPool"});
    require_error(MemoryPool::create(PoolProperties::device(0)), ErrorCode::NotSupported, "MEMORY_POOLS_SUPPORTED is 0");
    require_error(StreamOrderedBuffer<std::uint32_t>::allocate(16, stream), ErrorCode::NotSupported,
                  "MEMORY_POOLS_SUPPORTED is 0");
    require_error(MemoryPool::default_for(take(cudyn::Device::get(0))), ErrorCode::NotSupported,
                  "does not support memory pools");
    untouched.require_untouched();
    fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1);
}

TEST_CASE("a driver without pool entries says which is missing", "[legacy][pool]") {
    auto context = activate(0);
    auto stream = take(cudyn::Stream::create());
    require_error(MemoryPool::create(PoolProperties::device(0)), ErrorCode::NotSupported, "cuMemPoolCreate");
    require_error(StreamOrderedBuffer<std::uint32_t>::allocate(16, stream), ErrorCode::NotSupported, "cuMemAllocAsync");
    require_error(MemoryPool::default_for(take(cudyn::Device::get(0))), ErrorCode::NotSupported,
                  "cuDeviceGetDefaultMemPool");
    require_error(MemoryPool::managed_default_for(Location::device(0)), ErrorCode::NotSupported,
                  "cuMemGetDefaultMemPool");
}

TEST_CASE("CUDA 13's managed pools exist only where the driver has the entries", "[cuda11][pool]") {
    auto context = activate(0);
    require_error(MemoryPool::managed_default_for(Location::device(0)), ErrorCode::NotSupported,
                  "cuMemGetDefaultMemPool");
    require_error(MemoryPool::managed_current_for(Location::device(0)), ErrorCode::NotSupported, "cuMemGetMemPool");
}

TEST_CASE("on a created stream the stream keeps the context; retargeted to the legacy stream it frees in its own",
          "[emulated][cuda11][pool]") {
    const FakeDriver& fake = FakeDriver::loaded();
    std::optional<cudyn::Stream> stream;
    StreamOrderedBuffer<std::uint32_t> buffer;
    {
        auto context = activate(0);
        stream.emplace(take(cudyn::Stream::create()));
        buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(1024, *stream));
        require_ok(buffer.fill(3u));
    }
    CHECK(fake.primary_ctx_refcount(0) >= 1);  // the stream's retain
    // Another thread's view: no context current here; the free on the legacy
    // stream must make the buffer's own context current for the call.
    buffer.use_on(cudyn::Stream::legacy_default());
    require_ok(cudyn::call_driver(&cudyn::DriverTable::cuCtxSetCurrent_v4000, static_cast<CUcontext>(nullptr)));
    require_ok(buffer.free());
    CHECK(buffer.empty());
    require_ok(stream->destroy());
    CHECK(fake.primary_ctx_refcount(0) == 0);
}

TEST_CASE("on a created stream, allocation and free neither ask nor change the current context",
          "[emulated][cuda11][pool]") {
    // The driver takes the device and the order from a created stream: a
    // pool pair on device 0's stream works with device 1's context current,
    // or with none, and the library adds no context call to it.
    auto context0 = activate(0);
    auto pool = keeping_pool();
    auto stream = take(cudyn::Stream::create());
    auto context1 = activate(1);
    const CUcontext caller = context1.handle();
    for (const CUcontext current : {caller, static_cast<CUcontext>(nullptr)}) {
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuCtxSetCurrent_v4000, current));
        const DriverSnapshot before({"cuCtxGetCurrent", "cuCtxSetCurrent"});
        auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, stream));
        auto from_default_pool = take(StreamOrderedBuffer<std::uint32_t>::allocate(kWords, stream));
        require_ok(buffer.free());
        require_ok(from_default_pool.free());
        for (const char* entry : {"cuCtxGetCurrent", "cuCtxSetCurrent"}) {
            INFO(entry);
            CHECK(before.calls_since(entry) == 0);
        }
        CUcontext now = nullptr;
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuCtxGetCurrent_v4000, &now));
        CHECK(now == current);
    }
    require_ok(stream.synchronize());
    CHECK(take(pool.usage()).used_bytes == 0);
}

TEST_CASE("the returning form of the stream-ordered allocation (the 0.2.0 header's) allocates and frees",
          "[emulated][cuda11][pool]") {
    auto context = activate(0);
    auto pool = keeping_pool();
    auto stream = take(cudyn::Stream::create());
    auto memory = take(cudyn::detail::StreamOrderedMemory::allocate(kWords, sizeof(std::uint32_t), &pool, stream));
    CHECK(memory.bytes() == kWords * sizeof(std::uint32_t));
    CHECK(memory.address() != 0);
    CHECK(take(pool.usage()).used_bytes >= memory.bytes());
    require_error(cudyn::detail::StreamOrderedMemory::allocate(0, 4, &pool, stream), ErrorCode::InvalidArgument,
                  "count");
    require_ok(memory.release());
    CHECK(memory.empty());
    require_ok(stream.synchronize());
    CHECK(take(pool.usage()).used_bytes == 0);
}

TEST_CASE("CUDA 13's managed pools: one per location, the default also the current one", "[emulated][pool]") {
    auto context = activate(0);
    for (const Location where : {Location::device(0), Location::device(1), Location::host()}) {
        INFO(where.describe());
        auto pool = take(MemoryPool::managed_default_for(where));
        CHECK_FALSE(pool.owned());
        CHECK(pool.handle() != nullptr);
        CHECK(take(MemoryPool::managed_current_for(where)).handle() == pool.handle());
        require_ok(pool.set_managed_current_for(where));
    }
    CHECK(take(MemoryPool::managed_default_for(Location::device(0))).handle() !=
          take(MemoryPool::managed_default_for(Location::device(1))).handle());
    require_error(MemoryPool::managed_default_for(Location::device(-1)), ErrorCode::InvalidArgument, "negative device ordinal");
}

TEST_CASE("pools by location: host and host NUMA pools, their buffers, default and current per location",
          "[emulated][pool]") {
    auto context = activate(0);
    auto stream = take(cudyn::Stream::create());
    const auto caps = take(cudyn::probe_capabilities(take(cudyn::Device::get(0))));
    CHECK(caps.host_memory_pools);
    CHECK(caps.host_numa_memory_pools);
    for (const Location where : {Location::host(), Location::host_numa(1)}) {
        INFO(where.describe());
        auto pool = take(MemoryPool::create(PoolProperties(where)));
        CHECK(pool.location() == where);
        auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, 1024, stream));
        require_ok(buffer.fill(0xC0FFEEu, stream));
        std::vector<std::uint32_t> back(1024);
        require_ok(buffer.copy_to(cudyn::HostSpan<std::uint32_t>(back), stream));
        require_ok(stream.synchronize());
        CHECK(back == std::vector<std::uint32_t>(1024, 0xC0FFEEu));
        // Default and current for the location: one pool until set_current_for.
        auto by_default = take(MemoryPool::default_for(where));
        CHECK_FALSE(by_default.owned());
        CHECK(take(MemoryPool::current_for(where)).handle() == by_default.handle());
        require_ok(pool.set_current_for(where));
        CHECK(take(MemoryPool::current_for(where)).handle() == pool.handle());
        require_ok(by_default.set_current_for(where));
        CHECK(take(MemoryPool::current_for(where)).handle() == by_default.handle());
    }
    // A device location answers through the same calls.
    CHECK(take(MemoryPool::default_for(Location::device(1))).handle() ==
          take(MemoryPool::default_for(take(cudyn::Device::get(1)))).handle());
    auto host_pool = take(MemoryPool::create(PoolProperties(Location::host())));
    require_error(host_pool.set_current_for(Location::device(0)), ErrorCode::InvalidArgument,
                  "the pool lives in host, not in device 0");
    require_error(MemoryPool::create(PoolProperties(Location::host()).with_handle_types(HandleType::PosixFileDescriptor)),
                  ErrorCode::InvalidArgument, "a pool at the HOST location cannot be shared");
    require_error(MemoryPool::default_for(Location::device(-1)), ErrorCode::InvalidArgument, "negative");
    require_ok(stream.synchronize());
}

TEST_CASE("location-keyed pool look-ups refuse a device that does not exist and host NUMA current, naming the "
          "location, before the driver",
          "[emulated][pool]") {
    auto context = activate(0);
    auto pool = take(MemoryPool::create(PoolProperties::device(0)));
    const DriverSnapshot untouched({"cuMemGetDefaultMemPool", "cuMemGetMemPool", "cuMemSetMemPool",
                                    "cuDeviceGetDefaultMemPool", "cuDeviceGetMemPool", "cuDeviceSetMemPool"});
    const Location missing = Location::device(2);  // the suites' fake has two devices
    const Location numa_current = Location::host_numa_current();
    require_error(MemoryPool::default_for(missing), ErrorCode::InvalidArgument,
                  "MemoryPool::default_for: device 2 does not exist: 2 device(s) visible");
    require_error(MemoryPool::current_for(missing), ErrorCode::InvalidArgument,
                  "MemoryPool::current_for: device 2 does not exist");
    require_error(pool.set_current_for(missing), ErrorCode::InvalidArgument,
                  "MemoryPool::set_current_for: device 2 does not exist");
    require_error(MemoryPool::managed_default_for(missing), ErrorCode::InvalidArgument,
                  "MemoryPool::managed_default_for: device 2 does not exist");
    require_error(MemoryPool::managed_current_for(missing), ErrorCode::InvalidArgument,
                  "MemoryPool::managed_current_for: device 2 does not exist");
    require_error(pool.set_managed_current_for(missing), ErrorCode::InvalidArgument,
                  "MemoryPool::set_managed_current_for: device 2 does not exist");
    require_error(MemoryPool::default_for(numa_current), ErrorCode::InvalidArgument,
                  "MemoryPool::default_for: host NUMA current is no pool's location");
    require_error(MemoryPool::current_for(numa_current), ErrorCode::InvalidArgument,
                  "MemoryPool::current_for: host NUMA current is no pool's location");
    require_error(pool.set_current_for(numa_current), ErrorCode::InvalidArgument,
                  "MemoryPool::set_current_for: host NUMA current is no pool's location");
    require_error(MemoryPool::managed_current_for(numa_current), ErrorCode::InvalidArgument,
                  "MemoryPool::managed_current_for: host NUMA current is no pool's location");
    untouched.require_untouched();
    // The same look-ups of locations that exist reach the driver and answer.
    CHECK(take(MemoryPool::default_for(Location::device(1))).location() == Location::device(1));
    CHECK(take(MemoryPool::current_for(Location::host_numa(0))).location() == Location::host_numa(0));
}

TEST_CASE("pools by location: NotSupported where no device reports host pools", "[emulated][pool]") {
    auto context = activate(0);
    {
        const ScopedAttribute off0(0, CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED, 0);
        const ScopedAttribute off1(1, CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED, 0);
        const DriverSnapshot before;
        require_error(MemoryPool::create(PoolProperties(Location::host())), ErrorCode::NotSupported,
                      "HOST_MEMORY_POOLS_SUPPORTED");
        CHECK(before.live_delta() == 0);
    }
    {
        // One device is enough: a host pool serves every device.
        const ScopedAttribute off1(1, CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED, 0);
        auto pool = take(MemoryPool::create(PoolProperties(Location::host_numa(0))));
        CHECK(pool.owned());
    }
}

TEST_CASE("managed pools: the driver's answer on CUDA 13 without HMM", "[emulated][pool]") {
    auto context = activate(0);
    const auto properties = PoolProperties::device(0).with_memory_type(cudyn::PoolMemoryType::Managed);
    CHECK(properties.to_cu().allocType == CU_MEM_ALLOCATION_TYPE_MANAGED);
    CHECK(properties.describe() == "device 0, managed");
    auto refused = MemoryPool::create(properties);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().driver_result == CUDA_ERROR_NOT_SUPPORTED);
    CHECK(refused.error().entry_point == "cuMemPoolCreate");
}

TEST_CASE("pools by location on a driver before CUDA 13", "[cuda11][pool]") {
    auto context = activate(0);
    require_error(MemoryPool::create(PoolProperties::device(0).with_memory_type(cudyn::PoolMemoryType::Managed)),
                  ErrorCode::NotSupported, "need a CUDA 13 driver");
    require_error(MemoryPool::create(PoolProperties(Location::host())), ErrorCode::NotSupported,
                  "HOST_MEMORY_POOLS_SUPPORTED");
    // A device location still answers, through the per-device calls.
    auto by_location = take(MemoryPool::default_for(Location::device(0)));
    CHECK(by_location.handle() == take(MemoryPool::default_for(take(cudyn::Device::get(0)))).handle());
    CHECK(take(MemoryPool::current_for(Location::device(0))).handle() == by_location.handle());
    require_ok(by_location.set_current_for(Location::device(0)));
    require_error(MemoryPool::default_for(Location::host()), ErrorCode::NotSupported, "cuMemGetDefaultMemPool");
    require_error(MemoryPool::current_for(Location::host_numa(0)), ErrorCode::NotSupported, "cuMemGetMemPool");
    require_error(by_location.set_current_for(Location::host()), ErrorCode::NotSupported, "cuMemSetMemPool");
}

// A pool at the host or a host NUMA node: the driver refuses the typed host
// copies of its memory (cuMemcpyHtoD, DtoH and their Async forms answer
// INVALID_VALUE) and takes the unified cuMemcpy / cuMemcpyAsync. A buffer
// knows its pool's location and takes the unified copy at once; a view tries
// the typed copy, and once refused asks the memory's pool and copies unified.
TEST_CASE("host pool memory: the typed host copies refused, every cudyn copy path works on it", "[emulated][pool]") {
    auto context = activate(0);
    auto stream = take(cudyn::Stream::create());
    using cudyn::DriverTable;
    using cudyn::call_driver;
    for (const Location where : {Location::host(), Location::host_numa(1)}) {
        INFO(where.describe());
        auto pool = take(MemoryPool::create(PoolProperties(where)));
        auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, 1024, stream));
        require_ok(stream.synchronize());
        const CUdeviceptr address = buffer.device_address();
        const std::size_t bytes = buffer.size_bytes();
        std::vector<std::uint32_t> host(1024, 7u);

        // The driver's rule, as the fake models it.
        const auto refused = [](cudyn::Result<void> called) {
            return !called && called.error().driver_result == CUDA_ERROR_INVALID_VALUE;
        };
        CHECK(refused(call_driver(&DriverTable::cuMemcpyHtoD_v3020, address, host.data(), bytes)));
        CHECK(refused(call_driver(&DriverTable::cuMemcpyHtoDAsync_v3020, address, host.data(), bytes, stream.handle())));
        CHECK(refused(call_driver(&DriverTable::cuMemcpyDtoH_v3020, host.data(), address, bytes)));
        CHECK(refused(call_driver(&DriverTable::cuMemcpyDtoHAsync_v3020, host.data(), address, bytes, stream.handle())));
        require_ok(call_driver(&DriverTable::cuMemcpyAsync_v4000, address,
                               static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(host.data())), bytes,
                               stream.handle()));
        require_ok(stream.synchronize());
        const auto* words = reinterpret_cast<const std::uint32_t*>(static_cast<std::uintptr_t>(address));
        CHECK(std::vector<std::uint32_t>(words, words + 1024) == host);  // the host reads it directly

        // The buffer: the unified copy at once, never a typed one.
        const std::vector<std::uint32_t> up = iota_vector(1024, 100);
        std::vector<std::uint32_t> down(1024, 0);
        {
            const DriverSnapshot calls({"cuMemcpyHtoD_v2", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoH_v2",
                                        "cuMemcpyDtoHAsync_v2", "cuMemcpy", "cuMemcpyAsync"});
            require_ok(buffer.copy_from(cudyn::HostSpan<const std::uint32_t>(up)));
            require_ok(buffer.copy_to(cudyn::HostSpan<std::uint32_t>(down)));
            CHECK(down == up);
            require_ok(buffer.copy_from(cudyn::HostSpan<const std::uint32_t>(host), stream));
            require_ok(buffer.copy_to(cudyn::HostSpan<std::uint32_t>(down), stream));
            require_ok(stream.synchronize());
            CHECK(down == host);
            for (const char* typed : {"cuMemcpyHtoD_v2", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoH_v2", "cuMemcpyDtoHAsync_v2"}) {
                INFO(typed);
                CHECK(calls.calls_since(typed) == 0);
            }
            // The no-stream forms run on the buffer's stream and wait for it.
            CHECK(calls.calls_since("cuMemcpy") == 0);
            CHECK(calls.calls_since("cuMemcpyAsync") == 4);
        }
        // Device to device, both ways, with device memory of another pool.
        auto device_side = take(StreamOrderedBuffer<std::uint32_t>::allocate(1024, stream));
        require_ok(device_side.copy_from(cudyn::DeviceSpan<const std::uint32_t>(buffer.device_span()), stream));
        require_ok(buffer.fill(0u, stream));
        require_ok(buffer.copy_from(cudyn::DeviceSpan<const std::uint32_t>(device_side.device_span()), stream));
        require_ok(buffer.copy_to(cudyn::HostSpan<std::uint32_t>(down), stream));
        require_ok(stream.synchronize());
        CHECK(down == host);

        // A view does not know: the typed copy is refused once, then the unified one runs.
        const auto span = buffer.device_span();
        {
            const DriverSnapshot calls({"cuMemcpyHtoD_v2", "cuMemcpy", "cuMemcpyDtoHAsync_v2", "cuMemcpyAsync"});
            require_ok(span.copy_from(cudyn::HostSpan<const std::uint32_t>(up)));
            require_ok(span.copy_to(cudyn::HostSpan<std::uint32_t>(down), stream));
            require_ok(stream.synchronize());
            CHECK(down == up);
            CHECK(calls.calls_since("cuMemcpyHtoD_v2") == 1);
            CHECK(calls.calls_since("cuMemcpy") == 1);
            CHECK(calls.calls_since("cuMemcpyDtoHAsync_v2") == 1);
            CHECK(calls.calls_since("cuMemcpyAsync") == 1);
        }
        // A copy plan: unified copies (batch or per copy) take it as it is.
        {
            cudyn::CopyPlan plan;
            std::vector<std::uint32_t> planned(1024, 0);
            require_ok(plan.add(cudyn::HostSpan<std::uint32_t>(planned), cudyn::DeviceSpan<const std::uint32_t>(span)));
            (void)take(plan.execute(stream));
            require_ok(stream.synchronize());
            CHECK(planned == up);
        }
        require_ok(device_side.free());
        require_ok(buffer.free());
    }
    require_ok(stream.synchronize());
}

TEST_CASE("a view's typed copy refused for memory of no pool is reported as it is, not tried again",
          "[emulated][pool]") {
    auto context = activate(0);
    auto memory = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(256));
    const std::vector<std::uint32_t> up(256, 1u);
    const ScopedFault fault("cuMemcpyHtoD_v2:1:CUDA_ERROR_INVALID_VALUE");
    const DriverSnapshot calls({"cuMemcpy", "cuPointerGetAttribute"});
    const auto copied = memory.device_span().copy_from(cudyn::HostSpan<const std::uint32_t>(up));
    REQUIRE_FALSE(copied.has_value());
    CHECK(copied.error().driver_result == CUDA_ERROR_INVALID_VALUE);
    CHECK(copied.error().entry_point == "cuMemcpyHtoD_v2");
    CHECK(calls.calls_since("cuPointerGetAttribute") == 1);  // the pool asked, on the error path only
    CHECK(calls.calls_since("cuMemcpy") == 0);
}
