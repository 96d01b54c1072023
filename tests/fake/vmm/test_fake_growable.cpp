// GrowableBuffer on the fake drivers: growth in place (base and contents
// kept), shrinking, sleep/wake (release_physical / restore), and rollback
// when a step fails halfway.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/growable_buffer.hpp"

#include <signal.h>

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

using cudyn::AccessFlags;
using cudyn::AllocationProperties;
using cudyn::ErrorCode;
using cudyn::GrowableBuffer;
using cudyn::Location;
using cudyn_test::activate;
using cudyn_test::all_equal;
using cudyn_test::DriverSnapshot;
using cudyn_test::FakeDriver;
using cudyn_test::fill32;
using cudyn_test::kMiB;
using cudyn_test::require_error;
using cudyn_test::require_ok;
using cudyn_test::ScopedFault;
using cudyn_test::take;

namespace {

GrowableBuffer make_buffer(std::size_t capacity, cudyn::GrowableBufferOptions options = {2 * kMiB, {}}) {
    return take(GrowableBuffer::create(AllocationProperties::device(0), capacity, std::move(options)));
}

// Chunk i holds the word 0x1000 + i everywhere.
void stamp_chunks(const GrowableBuffer& buffer, std::size_t first = 0) {
    for (std::size_t i = first; i < buffer.chunk_count(); ++i)
        fill32(buffer.device_address() + i * buffer.chunk_size_bytes(), buffer.chunk_size_bytes(), 0x1000u + static_cast<std::uint32_t>(i));
}

bool chunks_stamped(const GrowableBuffer& buffer, std::size_t count) {
    // One copy over every chunk: the driver's copies span contiguous mappings.
    const auto words = cudyn_test::read32(buffer.device_address(), count * buffer.chunk_size_bytes());
    const std::size_t per_chunk = buffer.chunk_size_bytes() / 4;
    for (std::size_t i = 0; i < words.size(); ++i)
        if (words[i] != 0x1000u + i / per_chunk) return false;
    return true;
}

}  // namespace

TEST_CASE("a grown buffer keeps its base and its contents", "[emulated][cuda11][growable]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        auto buffer = make_buffer(64 * kMiB);
        CHECK(buffer.capacity_bytes() == 64 * kMiB);
        CHECK(buffer.chunk_size_bytes() == 2 * kMiB);
        CHECK(buffer.size_bytes() == 0);
        const CUdeviceptr base = buffer.device_address();
        CHECK(base % (2 * kMiB) == 0);

        require_ok(buffer.grow_to(3 * kMiB));  // rounded up to whole chunks
        CHECK(buffer.size_bytes() == 4 * kMiB);
        CHECK(buffer.chunk_count() == 2);
        stamp_chunks(buffer);

        require_ok(buffer.grow_to(40 * kMiB));
        CHECK(buffer.device_address() == base);
        CHECK(buffer.size_bytes() == 40 * kMiB);
        CHECK(chunks_stamped(buffer, 2));
        stamp_chunks(buffer, 2);
        CHECK(chunks_stamped(buffer, 20));
        require_ok(buffer.grow_to(10 * kMiB));  // smaller: nothing to do
        CHECK(buffer.size_bytes() == 40 * kMiB);

        const long live = FakeDriver::loaded().live_allocations();
        require_ok(buffer.shrink_to(5 * kMiB));
        CHECK(buffer.size_bytes() == 6 * kMiB);
        CHECK(FakeDriver::loaded().live_allocations() == live - 2 * 17);  // 17 chunks: mapping + memory each
        CHECK(chunks_stamped(buffer, 3));
        CHECK(cudyn_test::touch_in_child(base + 6 * kMiB, false) == SIGSEGV);  // unmapped again

        require_ok(buffer.resize(64 * kMiB));
        CHECK(buffer.size_bytes() == 64 * kMiB);
        CHECK(buffer.device_address() == base);
        CHECK(chunks_stamped(buffer, 3));
        require_ok(buffer.resize(0));
        CHECK(buffer.size_bytes() == 0);
        CHECK(buffer.chunk_count() == 0);

        GrowableBuffer moved = std::move(buffer);
        CHECK(buffer.empty());
        CHECK(moved.device_address() == base);
        require_error(buffer.grow_to(kMiB), ErrorCode::InvalidArgument, "empty");
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("GrowableBuffer bad input is InvalidArgument, nothing leaked", "[emulated][cuda11][growable]") {
    auto context = activate(0);
    constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
    const DriverSnapshot before({"cuMemAddressReserve", "cuMemCreate"});
    require_error(GrowableBuffer::create(AllocationProperties::device(0), 0), ErrorCode::InvalidArgument,
                  "capacity must be non-zero");
    require_error(GrowableBuffer::create(AllocationProperties::device(0), 8 * kMiB, {3 * kMiB, {}}),
                  ErrorCode::InvalidArgument, "chunk size 3145728 is not a multiple");
    require_error(GrowableBuffer::create(AllocationProperties::device(0), kMax - kMiB), ErrorCode::InvalidArgument,
                  "overflows");
    require_error(GrowableBuffer::create(AllocationProperties::device(-1), 8 * kMiB), ErrorCode::InvalidArgument,
                  "location");
    require_error(GrowableBuffer::create(AllocationProperties(Location::host_numa_current()), 8 * kMiB),
                  ErrorCode::InvalidArgument, "host NUMA current");
    require_error(GrowableBuffer::create(AllocationProperties::device(0), 8 * kMiB,
                                         {0, {{Location::device(0), static_cast<AccessFlags>(7)}}}),
                  ErrorCode::InvalidArgument, "flags 7");
    before.require_untouched();

    auto buffer = make_buffer(8 * kMiB);
    require_error(buffer.grow_to(8 * kMiB + 1), ErrorCode::InvalidArgument, "exceed the capacity");
    require_error(buffer.grow_to(kMax), ErrorCode::InvalidArgument, "exceed the capacity");
    require_ok(buffer.release_physical());
    require_error(buffer.grow_to(kMiB), ErrorCode::InvalidArgument, "restore() it first");
    require_error(buffer.shrink_to(0), ErrorCode::InvalidArgument, "restore() it first");
}

TEST_CASE("sleep and wake: release_physical keeps the addresses, restore brings the bytes back",
          "[emulated][cuda11][growable]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        auto buffer = make_buffer(32 * kMiB);
        require_ok(buffer.grow_to(10 * kMiB));
        stamp_chunks(buffer);
        const CUdeviceptr base = buffer.device_address();
        const long resident = FakeDriver::loaded().live_allocations();

        require_ok(buffer.release_physical(GrowableBuffer::Contents::Save));
        CHECK(buffer.released());
        CHECK(buffer.holds_saved_contents());
        CHECK(buffer.size_bytes() == 10 * kMiB);  // what restore() brings back
        CHECK(buffer.chunk_count() == 0);
        // Five chunks (mapping + memory) gone, one pinned copy added.
        CHECK(FakeDriver::loaded().live_allocations() == resident - 10 + 1);
        CHECK(cudyn_test::touch_in_child(base, false) == SIGSEGV);
        require_ok(buffer.release_physical());  // twice: nothing to do

        require_ok(buffer.restore());
        CHECK_FALSE(buffer.released());
        CHECK_FALSE(buffer.holds_saved_contents());
        CHECK(buffer.device_address() == base);
        CHECK(buffer.size_bytes() == 10 * kMiB);
        CHECK(chunks_stamped(buffer, 5));
        CHECK(FakeDriver::loaded().live_allocations() == resident);
        require_ok(buffer.restore());  // not released: nothing to do

        // Its DeviceSpan covers the mapped bytes; while released it is empty.
        auto words = take(buffer.device_span_as<std::uint32_t>());
        CHECK(words.device_address() == base);
        CHECK(words.size_bytes() == 10 * kMiB);
        require_ok(take(words.subspan(words.size() - 1, 1)).fill(0x5EEDu));
        require_ok(buffer.release_physical(GrowableBuffer::Contents::Save));
        CHECK(take(buffer.device_span_as<std::uint32_t>()).empty());
        require_ok(buffer.restore());
        CHECK(cudyn_test::read32(base + 10 * kMiB - 4, 4)[0] == 0x5EEDu);
        require_error(buffer.device_span_as<std::array<char, 3>>(), ErrorCode::InvalidArgument, "whole number of 3-byte");

        // Without saving, the memory comes back at the same addresses, usable.
        require_ok(buffer.release_physical(GrowableBuffer::Contents::Discard));
        CHECK_FALSE(buffer.holds_saved_contents());
        require_ok(buffer.restore());
        fill32(buffer.device_address(), buffer.size_bytes(), 9u);
        CHECK(all_equal(buffer.device_address(), buffer.size_bytes(), 9u));
        require_ok(buffer.grow_to(32 * kMiB));
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("a failure at each step of a grow rolls back to the previous size", "[emulated][cuda11][growable]") {
    auto context = activate(0);
    const DriverSnapshot outer;
    {
        auto buffer = make_buffer(64 * kMiB);
        require_ok(buffer.grow_to(4 * kMiB));
        stamp_chunks(buffer);
        const char* specs[] = {"cuMemCreate", "cuMemCreate:3", "cuMemMap", "cuMemMap:4", "cuMemSetAccess"};
        for (const char* spec : specs) {
            INFO(spec);
            const DriverSnapshot before;
            {
                ScopedFault fault(spec);
                auto grown = buffer.grow_to(20 * kMiB);
                REQUIRE_FALSE(grown.has_value());
                CHECK(grown.error().code == ErrorCode::OutOfMemory);
            }
            CHECK(buffer.size_bytes() == 4 * kMiB);
            CHECK(buffer.chunk_count() == 2);
            CHECK(before.live_delta() == 0);
            CHECK(chunks_stamped(buffer, 2));
            CHECK(cudyn_test::touch_in_child(buffer.device_address() + 4 * kMiB, false) == SIGSEGV);
        }
        // And the buffer still grows once the driver behaves.
        require_ok(buffer.grow_to(20 * kMiB));
        CHECK(buffer.size_bytes() == 20 * kMiB);
        CHECK(chunks_stamped(buffer, 2));
    }
    CHECK(outer.live_delta() == 0);
}

TEST_CASE("a failure at each step of sleep or wake leaves the buffer usable", "[emulated][cuda11][growable]") {
    auto context = activate(0);
    const DriverSnapshot outer;
    {
        auto buffer = make_buffer(32 * kMiB);
        require_ok(buffer.grow_to(8 * kMiB));
        stamp_chunks(buffer);

        for (const char* spec : {"cuMemHostAlloc", "cuMemcpyDtoH"}) {
            INFO(spec);
            const DriverSnapshot before;
            {
                ScopedFault fault(spec);
                REQUIRE_FALSE(buffer.release_physical(GrowableBuffer::Contents::Save).has_value());
            }
            CHECK_FALSE(buffer.released());
            CHECK(buffer.size_bytes() == 8 * kMiB);
            CHECK(before.live_delta() == 0);
            CHECK(chunks_stamped(buffer, 4));
        }

        require_ok(buffer.release_physical(GrowableBuffer::Contents::Save));
        const char* specs[] = {"cuMemCreate", "cuMemCreate:3", "cuMemMap:2", "cuMemSetAccess", "cuMemcpyHtoD"};
        for (const char* spec : specs) {
            INFO(spec);
            const DriverSnapshot before;
            {
                ScopedFault fault(spec);
                REQUIRE_FALSE(buffer.restore().has_value());
            }
            CHECK(buffer.released());
            CHECK(buffer.holds_saved_contents());
            CHECK(buffer.size_bytes() == 8 * kMiB);
            CHECK(buffer.chunk_count() == 0);
            CHECK(before.live_delta() == 0);
        }
        require_ok(buffer.restore());
        CHECK(buffer.size_bytes() == 8 * kMiB);
        CHECK(chunks_stamped(buffer, 4));
    }
    CHECK(outer.live_delta() == 0);
}

TEST_CASE("GrowableBuffer grants peers access to every chunk it maps", "[emulated][cuda11][growable]") {
    const DriverSnapshot before;
    {
        auto buffer = GrowableBuffer::create(AllocationProperties::device(1), 16 * kMiB,
                                             {0, {{Location::device(1), AccessFlags::ReadWrite},
                                                  {Location::device(0), AccessFlags::ReadWrite}}});
        REQUIRE(buffer.has_value());
        CHECK(buffer->chunk_size_bytes() == 2 * kMiB);  // the recommended granularity
        require_ok(buffer->grow_to(6 * kMiB));
        auto on_zero = activate(0);
        fill32(buffer->device_address(), buffer->size_bytes(), 0x5EEDu);
        unsigned long long flags = 0;
        const CUmemLocation zero = Location::device(0).to_cu();
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemGetAccess_v10020, &flags, &zero,
                                      buffer->device_address() + 4 * kMiB));
        CHECK(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        auto on_one = activate(1);
        CHECK(all_equal(buffer->device_address(), buffer->size_bytes(), 0x5EEDu));
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("GrowableBuffer: NotSupported on legacy and on a device without VMM", "[emulated][cuda11][legacy][growable]") {
    auto context = activate(0);
    const DriverSnapshot before;
    if (FakeDriver::loaded().variant() == "legacy") {
        require_error(GrowableBuffer::create(AllocationProperties::device(0), 8 * kMiB), ErrorCode::NotSupported,
                      "cuMemGetAllocationGranularity");
    } else {
        FakeDriver::loaded().set_attribute(1, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0);
        auto refused = GrowableBuffer::create(AllocationProperties::device(1), 8 * kMiB);
        FakeDriver::loaded().set_attribute(1, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1);
        require_error(refused, ErrorCode::NotSupported, "device 1: it does not support virtual memory management");
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("GrowableBuffer's destructor stays silent once the driver is deinitialised", "[emulated][growable]") {
    auto context = activate(0);
    auto buffer = make_buffer(8 * kMiB);
    require_ok(buffer.grow_to(4 * kMiB));
    require_ok(buffer.release_physical(GrowableBuffer::Contents::Save));
    require_ok(buffer.restore());
    FakeDriver::loaded().set_deinitialized(true);
    { GrowableBuffer dying = std::move(buffer); }  // every call answers DEINITIALIZED: no throw, no abort
    FakeDriver::loaded().set_deinitialized(false);
    CHECK(FakeDriver::loaded().call_count("cuMemUnmap") >= 2);
}
