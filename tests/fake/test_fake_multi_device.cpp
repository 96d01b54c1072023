// Two devices ([multi-device]; the fake suites run with two devices, each
// pair with a peer path unless a test switches it off): a device-0 pool used
// by device 1 and its refusals, stream-ordered buffers from that pool used
// and freed on a stream of device 1's context, copy plans between the
// devices, device-1 memory shared with a process whose context is device 0's,
// and teardown of memory granted to device 1 while both devices still have
// work on it.
#include "support/catch.hpp"
#include "support/child_process.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/ipc_helpers.hpp"
#include "support/share_any_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/memory/copy_plan.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/vmm/growable_buffer.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/share/allocation_sharing.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include <cstdint>
#include <limits>
#include <vector>

using cudyn::AccessFlags;
using cudyn::AllocationProperties;
using cudyn::CopyPlan;
using cudyn::DriverTable;
using cudyn::ErrorCode;
using cudyn::HandleType;
using cudyn::Location;
using cudyn::MemoryPool;
using cudyn::PoolProperties;
using cudyn::AllocationKind;
using cudyn::Stream;
using cudyn::StreamOrderedBuffer;
using cudyn::call_driver;
using namespace cudyn_test;  // FakeDriver, ScopedAttribute, ScopedStreamDelay, activate, take, require_ok, require_error

namespace {

constexpr std::size_t kWords = 1 << 16;  // 256 KiB of uint32_t

// cuDeviceCanAccessPeer(accessor, owner) answers `can` for the scope; then a
// peer path again, the suites' default.
class ScopedPeerAccess {
public:
    ScopedPeerAccess(int accessor, int owner, bool can) : accessor_(accessor), owner_(owner) { set(can); }
    ~ScopedPeerAccess() { set(true); }
    ScopedPeerAccess(const ScopedPeerAccess&) = delete;
    ScopedPeerAccess& operator=(const ScopedPeerAccess&) = delete;

private:
    void set(bool can) const {
        auto function = reinterpret_cast<PFN_fakecuda_set_peer_access>(
            FakeDriver::loaded().symbol("fakecuda_set_peer_access"));
        REQUIRE(function != nullptr);
        function(accessor_, owner_, can ? 1 : 0);
    }
    int accessor_;
    int owner_;
};

// A device-0 pool that keeps freed memory, device 1 granted read-write.
MemoryPool shared_pool() {
    auto pool = take(MemoryPool::create(PoolProperties::device(0)));
    require_ok(pool.set_release_threshold(std::numeric_limits<std::uint64_t>::max()));
    require_ok(pool.set_access({Location::device(1), AccessFlags::ReadWrite}));
    return pool;
}

// The second process: device 0's context current (not the device the memory
// lives on), opens whatever was shared without knowing its kind.
int device0_consumer_role(int, char**) {
    return ipc::run_role(
        "multi-device-consumer",
        [](ChildChecks& check, cudyn::FdChannel& channel) { share_any::consume(check, channel, ipc::kStep); }, 0);
}
const ChildRole device0_consumer("multi-device-consumer", device0_consumer_role);

void share_with_device0_process(CUdeviceptr base, CUdeviceptr part, std::size_t bytes,
                                const share_any::Expected& expected) {
    share_any::share_with_consumer(base, part, bytes, expected, share_any::Exchange("multi-device-consumer"));
}

}  // namespace

TEST_CASE("a device-0 pool: device 1 gets access when granted, none before or after revoking",
          "[emulated][cuda11][multi-device]") {
    auto context = activate(0);
    auto pool = take(MemoryPool::create(PoolProperties::device(0)));
    // Outside the access list: the driver reports no access for device 1.
    CHECK(take(pool.access(Location::device(1))) == AccessFlags::None);
    require_ok(pool.set_access({Location::device(1), AccessFlags::ReadWrite}));
    CHECK(take(pool.access(Location::device(1))) == AccessFlags::ReadWrite);
    CHECK(take(pool.access(Location::device(0))) == AccessFlags::ReadWrite);
    // The list is per device: device 1's grant gives the owner nothing new to
    // lose, and revoking device 1 leaves device 0 untouched.
    require_ok(pool.set_access({Location::device(1), AccessFlags::None}));
    CHECK(take(pool.access(Location::device(1))) == AccessFlags::None);
    CHECK(take(pool.access(Location::device(0))) == AccessFlags::ReadWrite);
}

TEST_CASE("a device-0 pool: device 1 is refused without a peer path, and the pool is left as it was",
          "[emulated][cuda11][multi-device]") {
    auto context = activate(0);
    auto pool = take(MemoryPool::create(PoolProperties::device(0)));
    {
        const ScopedPeerAccess off(1, 0, false);
        const DriverSnapshot before({"cuMemPoolSetAccess"});
        require_error(pool.set_access({Location::device(1), AccessFlags::ReadWrite}), ErrorCode::NotSupported,
                      "cuDeviceCanAccessPeer is 0");
        before.require_untouched();  // refused before the driver is asked
        CHECK(take(pool.access(Location::device(1))) == AccessFlags::None);
        // Revoking needs no peer path.
        require_ok(pool.set_access({Location::device(1), AccessFlags::None}));
    }
    // Peer access is per pair, and per direction: device 0 reaching device 1
    // says nothing about device 1 reaching device 0.
    {
        const ScopedPeerAccess off(0, 1, false);
        require_ok(pool.set_access({Location::device(1), AccessFlags::ReadWrite}));
        CHECK(take(pool.access(Location::device(1))) == AccessFlags::ReadWrite);
    }
    // The fake driver refuses too, for a program that skips cudyn's check.
    {
        const ScopedPeerAccess off(1, 0, false);
        auto raw = take(MemoryPool::create(PoolProperties::device(0)));
        CUmemAccessDesc grant{};
        grant.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        grant.location.id = 1;
        grant.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        const auto refused = call_driver(&DriverTable::cuMemPoolSetAccess_v11020, raw.handle(), &grant, std::size_t{1});
        REQUIRE_FALSE(refused.has_value());
        CHECK(refused.error().driver_result == CUDA_ERROR_INVALID_DEVICE);
        CHECK(take(raw.access(Location::device(1))) == AccessFlags::None);
    }
}

TEST_CASE("a device without MEMORY_POOLS_SUPPORTED refuses pools; the other device still makes them",
          "[emulated][cuda11][multi-device]") {
    auto context = activate(0);
    const ScopedAttribute no_pools(1, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0);
    const long pools = FakeDriver::loaded().live_pools();
    const DriverSnapshot before({"cuMemPoolCreate"});
    require_error(MemoryPool::create(PoolProperties::device(1)), ErrorCode::NotSupported,
                  "device 1 does not support memory pools");
    before.require_untouched();
    CHECK(FakeDriver::loaded().live_pools() == pools);
    auto pool = take(MemoryPool::create(PoolProperties::device(0)));
    CHECK(pool.location() == Location::device(0));
}

TEST_CASE("a stream-ordered buffer from a device-0 pool is written, read and freed on device 1's stream",
          "[emulated][cuda11][multi-device]") {
    auto on_zero = activate(0);
    auto pool = shared_pool();
    auto allocating = take(Stream::create());
    auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, allocating));
    // Device 1's stream may use the memory once the allocation is done.
    require_ok(allocating.synchronize());
    {
        auto on_one = activate(1);
        auto peer_stream = take(Stream::create());
        const ScopedStreamDelay slow(2000);
        const auto values = iota_vector(kWords, 11);
        require_ok(buffer.copy_from(values, peer_stream));
        std::vector<std::uint32_t> back(kWords);
        require_ok(buffer.copy_to(back, peer_stream));
        CHECK(buffer.stream() == peer_stream.handle());
        require_ok(peer_stream.synchronize());
        CHECK(back == values);
        CHECK(read_device(buffer.device_address(), 4) == std::vector<std::uint32_t>{11, 12, 13, 14});
        // The free goes on device 1's stream, after its work: in stream order.
        require_ok(buffer.fill(7u, peer_stream));
        require_ok(buffer.free());
        CHECK(buffer.empty());
        require_ok(peer_stream.synchronize());
        CHECK(FakeDriver::loaded().context_error(1) == 0);
        require_ok(on_zero.make_current());
    }
    CHECK(take(pool.usage()).used_bytes == 0);
    CHECK(FakeDriver::loaded().context_error(0) == 0);
}

TEST_CASE("a copy plan moves bytes between the devices, with or without a peer path",
          "[emulated][cuda11][legacy][multi-device]") {
    auto on_one = activate(1);
    auto on_device1 = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords));
    require_ok(on_device1.copy_from(iota_vector(kWords, 500)));
    auto on_zero = activate(0);
    auto on_device0 = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords));
    require_ok(on_device0.copy_from(iota_vector(kWords, 1)));
    auto from_one = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords));  // on device 0, filled from device 1
    require_ok(from_one.set_bytes(0));
    auto stream = take(Stream::create());

    // The first half of device 0's words to device 1, device 1's second half
    // back to device 0: two peer copies in one plan.
    const std::size_t half = kWords / 2;
    CopyPlan plan;
    require_ok(plan.add(take(on_device1.device_span().subspan(0, half)),
                        take(on_device0.device_span().subspan(0, half))));
    require_ok(plan.add(take(from_one.device_span().subspan(half, half)),
                        take(on_device1.device_span().subspan(half, half))));
    take(plan.execute(stream));
    require_ok(stream.synchronize());
    std::vector<std::uint32_t> expected1 = iota_vector(kWords, 500);
    for (std::size_t i = 0; i < half; ++i) expected1[i] = static_cast<std::uint32_t>(1 + i);
    CHECK(read_device(on_device1.device_address(), kWords) == expected1);
    std::vector<std::uint32_t> expected0(kWords, 0u);
    for (std::size_t i = half; i < kWords; ++i) expected0[i] = static_cast<std::uint32_t>(500 + i);
    CHECK(read_device(from_one.device_address(), kWords) == expected0);

    // Copies between devices need no peer path (the driver stages them
    // through the host): the same plan runs with device 1 unable to reach 0.
    const ScopedPeerAccess off(1, 0, false);
    const ScopedPeerAccess back_off(0, 1, false);
    require_ok(on_device0.fill(3u));
    take(plan.execute(stream));
    require_ok(stream.synchronize());
    CHECK(read_device(on_device1.device_address(), 1) == std::vector<std::uint32_t>{3u});
    CHECK(read_device(on_device1.device_address() + (half - 1) * 4, 2) ==
          std::vector<std::uint32_t>{3u, static_cast<std::uint32_t>(500 + half)});
}

TEST_CASE("a GrowableBuffer on device 0 granted to device 1 waits for both devices' work when destroyed",
          "[emulated][multi-device]") {
    auto on_zero = activate(0);
    auto on_one = activate(1);
    require_ok(on_zero.make_current());
    const DriverSnapshot before;
    const ScopedStreamDelay slow(50'000);
    {
        cudyn::GrowableBufferOptions options;
        options.access = {{Location::device(0), AccessFlags::ReadWrite}, {Location::device(1), AccessFlags::ReadWrite}};
        auto buffer = take(cudyn::GrowableBuffer::create(AllocationProperties::device(0), 64 * kMiB, options));
        require_ok(buffer.grow_to(4 * kMiB));
        const std::size_t words = 2 * kMiB / 4;
        auto zero_stream = take(Stream::create(false));
        require_ok(call_driver(&DriverTable::cuMemsetD32Async_v3020, buffer.device_address(), 0xAAu, words,
                               zero_stream.handle()));
        require_ok(on_one.make_current());
        auto one_stream = take(Stream::create(false));
        require_ok(call_driver(&DriverTable::cuMemsetD32Async_v3020, buffer.device_address() + 2 * kMiB, 0xBBu, words,
                               one_stream.handle()));
        require_ok(on_zero.make_current());
        REQUIRE(FakeDriver::loaded().pending_work() >= 2);
        // The destructor (device 0's context current) runs before the
        // streams': it must wait for device 1's work as well as device 0's.
        buffer = cudyn::GrowableBuffer();
        CHECK(FakeDriver::loaded().pending_work() == 0);
        CHECK(FakeDriver::loaded().context_error(0) == 0);
        CHECK(FakeDriver::loaded().context_error(1) == 0);
        require_ok(on_one.make_current());  // each stream is destroyed in its own context anyway
    }
    require_ok(on_zero.make_current());
    CHECK(before.live_delta() == 0);
    CHECK(FakeDriver::loaded().context_error(0) == 0);
    CHECK(FakeDriver::loaded().context_error(1) == 0);
}

TEST_CASE("device-1 cuMemAlloc memory is opened by a process whose context is device 0's",
          "[emulated][cuda11][legacy][multi-device]") {
    auto on_one = activate(1);
    auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(kMiB / 4));
    share_with_device0_process(buffer.device_address(), buffer.device_address() + 4096, 64 * 1024,
                               {AllocationKind::LegacyIpc, HandleType::None, kMiB});
}

TEST_CASE("device-1 VMM and pool memory are opened by a process whose context is device 0's",
          "[emulated][cuda11][multi-device]") {
    auto on_one = activate(1);
    SECTION("VMM memory, a POSIX descriptor") {
        const std::size_t granule = 2 * kMiB;
        auto range = take(cudyn::AddressRange::reserve(2 * granule));
        auto memory = take(cudyn::PhysicalMemory::create(
            AllocationProperties::device(1).with_handle_types(HandleType::PosixFileDescriptor), 2 * granule));
        auto mapping = take(cudyn::MappedRange::map(range, 0, memory, {{Location::device(1), AccessFlags::ReadWrite}}));
        share_with_device0_process(mapping.device_address(), mapping.device_address() + 4096, kMiB,
                                   {AllocationKind::Vmm, HandleType::PosixFileDescriptor, 2 * granule});
    }
    SECTION("pool memory, the pool travelling with it") {
        auto pool = take(MemoryPool::create(PoolProperties::device(1).with_handle_types(HandleType::PosixFileDescriptor)));
        auto stream = take(Stream::create());
        auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kMiB / 4, stream));
        require_ok(stream.synchronize());  // allocated before the other process uses it
        share_with_device0_process(buffer.device_address(), buffer.device_address() + 64, 128 * 1024,
                                   {AllocationKind::Pool, HandleType::PosixFileDescriptor, kMiB});
        require_ok(buffer.free());
        require_ok(stream.synchronize());
    }
}
