// gpu suite: the memory ledger against what the driver itself says. Device
// and VMM memory move cuMemGetInfo's free bytes by what the ledger counts
// (the driver rounds up to its page); a pool's used bytes are what the ledger
// counts for the stream-ordered buffers it serves.
// Skips (exit 77) where no device is present: see tests/support/test_main.cpp.
#include "support/catch.hpp"
#include "support/vmm_helpers.hpp"  // take, require_ok

#include "cudyn/core/memory_ledger.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/managed_buffer.hpp"
#include "cudyn/memory/memory_info.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"
#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/vmm/physical_memory.hpp"

#include <cstdint>
#include <limits>

using cudyn::MemoryKind;
using cudyn_test::require_ok;
using cudyn_test::take;

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kSlack = 8 * kMiB;  // the driver's rounding and its own bookkeeping

std::uint64_t used_on_device() {
    const auto info = take(cudyn::current_device_memory_info());
    return info.total_bytes - info.free_bytes;
}
std::uint64_t live(MemoryKind kind) { return cudyn::ledger::snapshot().of(kind, 0).live_bytes; }

// What the driver took for an allocation (used bytes now against `before`,
// either way) is what the ledger counted, give or take its rounding.
void require_close(std::uint64_t used_now, std::uint64_t used_before, std::uint64_t ledger_delta) {
    const auto driver_delta = static_cast<std::int64_t>(used_now) - static_cast<std::int64_t>(used_before);
    const auto difference = driver_delta - static_cast<std::int64_t>(ledger_delta);
    INFO("driver " << driver_delta << " B, ledger " << ledger_delta << " B");
    CHECK(difference <= static_cast<std::int64_t>(kSlack));
    CHECK(difference >= -static_cast<std::int64_t>(kSlack));
}

}  // namespace

TEST_CASE("the ledger's device and VMM bytes match cuMemGetInfo's deltas", "[gpu][ledger]") {
    auto context = take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(0))));
    REQUIRE(cudyn::ledger::enabled());
    const std::uint64_t used_before = used_on_device();
    const std::uint64_t device_before = live(MemoryKind::Device);
    {
        auto buffer = take(cudyn::DeviceBuffer<unsigned char>::allocate(256 * kMiB));
        CHECK(live(MemoryKind::Device) - device_before == 256 * kMiB);
        require_close(used_on_device(), used_before, live(MemoryKind::Device) - device_before);
    }
    CHECK(live(MemoryKind::Device) == device_before);
    require_close(used_on_device(), used_before, 0);

    const auto properties = cudyn::AllocationProperties::device(0);
    const std::uint64_t physical_before = live(MemoryKind::VmmPhysical);
    {
        auto physical = take(cudyn::PhysicalMemory::create(properties, 128 * kMiB));
        auto range = take(cudyn::AddressRange::reserve(128 * kMiB));
        auto mapping = take(cudyn::MappedRange::map(range, 0, physical));
        CHECK(live(MemoryKind::VmmPhysical) - physical_before == 128 * kMiB);
        CHECK(live(MemoryKind::VmmMapped) == 128 * kMiB);
        require_close(used_on_device(), used_before, live(MemoryKind::VmmPhysical) - physical_before);
    }
    CHECK(live(MemoryKind::VmmPhysical) == physical_before);
    CHECK(live(MemoryKind::VmmMapped) == 0);
}

TEST_CASE("the ledger's stream-ordered bytes match the pool's used bytes", "[gpu][ledger]") {
    auto context = take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(0))));
    auto pool = take(cudyn::MemoryPool::create(cudyn::PoolProperties::device(0)));
    require_ok(pool.set_release_threshold(std::numeric_limits<std::uint64_t>::max()));
    auto stream = take(cudyn::Stream::create());
    const std::uint64_t before = live(MemoryKind::StreamOrdered);
    {
        auto a = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, 16 * kMiB / 4, stream));
        auto b = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, 48 * kMiB / 4, stream));
        require_ok(stream.synchronize());
        CHECK(live(MemoryKind::StreamOrdered) - before == 64 * kMiB);
        const auto usage = take(pool.usage());
        require_close(usage.used_bytes, 0, live(MemoryKind::StreamOrdered) - before);
        CHECK(cudyn::ledger::snapshot().of(MemoryKind::StreamOrdered, 0).peak_bytes >= 64 * kMiB);
    }
    require_ok(stream.synchronize());
    CHECK(live(MemoryKind::StreamOrdered) == before);
    CHECK(take(pool.usage()).used_bytes == 0);
    // Managed and pinned memory: counted on the device whose context made them.
    const std::uint64_t managed = live(MemoryKind::Managed);
    auto buffer = take(cudyn::ManagedBuffer<unsigned char>::allocate(32 * kMiB));
    auto pinned = take(cudyn::PinnedBuffer<unsigned char>::allocate(kMiB));
    CHECK(live(MemoryKind::Managed) - managed == 32 * kMiB);
    CHECK(live(MemoryKind::Pinned) >= kMiB);
    INFO(cudyn::ledger::format(cudyn::ledger::snapshot()));
    CHECK(cudyn::ledger::snapshot().live_bytes() >= 33 * kMiB);
}
