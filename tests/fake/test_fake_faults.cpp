// Promises that must hold when the driver fails half-way: each case
// is a finding of the acceptance tests, reproduced with the fake's fault
// injection, then checked for the fixed behaviour: the error comes back, the
// object keeps a state the driver agrees with, a retry works, nothing leaks.
// The VMM cases run with the [growable] / [vmm] topics (Linux), the others
// as [faults] on every fake that emulates memory.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/vmm/growable_buffer.hpp"
#include "cudyn/memory/host_registration.hpp"
#include "cudyn/memory/migration_policy.hpp"
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/memory/managed_buffer.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using cudyn::AllocationProperties;
using cudyn::ErrorCode;
using cudyn::GrowableBuffer;
using namespace cudyn_test;  // FakeDriver, ScopedFault, activate, take, require_ok, require_error, kMiB

namespace {

constexpr std::size_t kChunk = 2 * kMiB;

GrowableBuffer three_chunks(std::uint32_t stamp) {
    auto buffer = take(GrowableBuffer::create(AllocationProperties::device(0), 16 * kChunk));
    require_ok(buffer.grow_to(3 * kChunk));
    require_ok(take(buffer.device_span_as<std::uint32_t>()).fill(stamp));
    return buffer;
}

}  // namespace

TEST_CASE("shrink_to keeps a chunk the driver refused to unmap; a retry and later growth work",
          "[emulated][cuda11][growable]") {
    auto context = activate(0);
    const DriverSnapshot before;
    for (int failing = 1; failing <= 2; ++failing) {
        INFO("cuMemUnmap fails on unmap " << failing);
        auto buffer = three_chunks(0x0F0F0F0Fu);
        {
            const ScopedFault fault(("cuMemUnmap:" + std::to_string(failing)).c_str());
            require_error(buffer.shrink_to(0), ErrorCode::OutOfMemory, "chunk(s) mapped; retry");
        }
        // The refused chunk and those below it are still there, and readable.
        CHECK(buffer.chunk_count() == static_cast<std::size_t>(3 - (failing - 1)));
        CHECK(all_equal(buffer.device_address(), buffer.size_bytes(), 0x0F0F0F0Fu));
        require_ok(buffer.shrink_to(0));
        CHECK(buffer.chunk_count() == 0);
        require_ok(buffer.grow_to(3 * kChunk));  // cuMemMap at the same offsets: nothing was left mapped there
        CHECK(buffer.chunk_count() == 3);
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("release_physical(Save) refused part-way: restore and a retried release both work",
          "[emulated][cuda11][growable]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        auto buffer = three_chunks(0xA1A1A1A1u);
        {
            const ScopedFault fault("cuMemUnmap:2");
            require_error(buffer.release_physical(GrowableBuffer::Contents::Save), ErrorCode::OutOfMemory, "retry");
        }
        CHECK(buffer.released());
        CHECK(buffer.holds_saved_contents());
        CHECK(buffer.chunk_count() == 2);  // the last chunk went; the refused one and the one below stay mapped
        require_ok(buffer.restore());      // maps the missing chunk, copies the saved bytes back
        CHECK_FALSE(buffer.released());
        CHECK(buffer.chunk_count() == 3);
        CHECK(all_equal(buffer.device_address(), 3 * kChunk, 0xA1A1A1A1u));
    }
    {
        auto buffer = three_chunks(0xB2B2B2B2u);
        {
            const ScopedFault fault("cuMemUnmap:1");
            require_error(buffer.release_physical(GrowableBuffer::Contents::Save), ErrorCode::OutOfMemory, "retry");
        }
        require_ok(buffer.release_physical(GrowableBuffer::Contents::Save));  // the retry unmaps the rest
        CHECK(buffer.chunk_count() == 0);
        require_ok(buffer.restore());
        CHECK(all_equal(buffer.device_address(), 3 * kChunk, 0xB2B2B2B2u));
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("a capability read that fails for another reason than absence is not NotSupported",
          "[emulated][cuda11][vmm]") {
    auto context = activate(0);
    const DriverSnapshot before;
    // Capabilities are read once per device: start from an empty cache so
    // that the faults below land on the first read.
    cudyn::detail::forget_capabilities();
    {
        // The first attribute read is VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED's.
        const ScopedFault fault("cuDeviceGetAttribute:1:CUDA_ERROR_OUT_OF_MEMORY");
        const auto created = cudyn::PhysicalMemory::create(AllocationProperties::device(0), kChunk);
        REQUIRE_FALSE(created.has_value());
        CHECK(created.error().code == ErrorCode::OutOfMemory);
        CHECK(created.error().driver_result == CUDA_ERROR_OUT_OF_MEMORY);
    }
    {
        // An attribute the driver does not know reads as "no": NotSupported.
        const ScopedFault fault("cuDeviceGetAttribute:1:CUDA_ERROR_INVALID_VALUE");
        require_error(cudyn::PhysicalMemory::create(AllocationProperties::device(0), kChunk), ErrorCode::NotSupported,
                      "virtual memory management");
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("a policy whose second advice fails says what stayed applied", "[emulated][cuda11][faults]") {
    auto context = activate(0);
    auto buffer = take(cudyn::ManagedBuffer<std::uint32_t>::allocate(1024));
    auto range = take(buffer.managed_range());
    const auto advise_entry = cudyn::has_entry(&cudyn::DriverTable::cuMemAdvise_v12020) ? "cuMemAdvise_v2:2"
                                                                                         : "cuMemAdvise:2";
    {
        const ScopedFault fault(advise_entry);
        const auto applied = cudyn::MigrationPolicy::read_mostly().apply_to(range);
        require_error(applied, ErrorCode::OutOfMemory, "advice 2 of 2, preferred location unset, failed");
        CHECK(applied.error().message.find("still in effect: read-mostly set") != std::string::npos);
    }
    // What the error says is what the range says.
    int read_mostly = 0;
    require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemRangeGetAttribute_v8000, &read_mostly, sizeof read_mostly,
                                  CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, range.device_address(), range.size_bytes()));
    CHECK(read_mostly == 1);
    {
        const ScopedFault fault(cudyn::has_entry(&cudyn::DriverTable::cuMemAdvise_v12020) ? "cuMemAdvise_v2:1"
                                                                                          : "cuMemAdvise:1");
        require_error(cudyn::MigrationPolicy::prefer_host().apply_to(range), ErrorCode::OutOfMemory,
                      "nothing was applied");
    }
    require_ok(cudyn::MigrationPolicy::prefer_host().apply_to(range));  // a retry applies all of it
}

TEST_CASE("host registrations refuse sizes that wrap, before the driver", "[emulated][cuda11][legacy][faults]") {
    auto context = activate(0);
    std::vector<std::uint32_t> words(16);
    const DriverSnapshot untouched({"cuMemHostRegister_v2", "cuMemHostRegister"});
    // A hand-made span whose byte size wraps size_t (SIZE_MAX / 4 + 2 elements: 4 bytes after wrapping).
    const cudyn::HostSpan<std::uint32_t> huge(words.data(), std::numeric_limits<std::size_t>::max() / 4 + 2);
    require_error(cudyn::HostRegistration::register_span(huge), ErrorCode::InvalidArgument, "overflows size_t");
    // A range that runs past the end of the address space.
    require_error(cudyn::HostRegistration::register_memory(words.data(), std::numeric_limits<std::size_t>::max()),
                  ErrorCode::InvalidArgument, "past the end of the address space");
    untouched.require_untouched();
}

TEST_CASE("a hand-made device span whose range wraps the address space is refused before the driver",
          "[emulated][cuda11][legacy][faults]") {
    auto context = activate(0);
    const DriverSnapshot untouched({"cuMemsetD32_v2", "cuMemcpyHtoD_v2"});
    const cudyn::DeviceSpan<std::uint32_t> wrapping(~CUdeviceptr{0} - 8, 4);  // 16 bytes from 9 before the end
    require_error(wrapping.fill(0u), ErrorCode::InvalidArgument, "wraps around");
    const std::vector<std::uint32_t> host(4, 1u);
    require_error(wrapping.copy_from(host), ErrorCode::InvalidArgument, "wraps around");
    untouched.require_untouched();
}
