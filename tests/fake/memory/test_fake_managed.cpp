// Managed memory on the fake drivers: ManagedBuffer, advice, MigrationPolicy,
// prefetch and PrefetchPlan. The emulated driver (13.0) serves advice and
// prefetch through the CUmemLocation entries (_v2) and the batch entry; cuda11
// and legacy only have the v1 entries, where the host is CU_DEVICE_CPU and
// NUMA targets are NotSupported. The fake logs each advice and prefetch with
// the entry that served it and the location decoded, so every test checks the
// location's type AND id (a zeroed location silently meaning device 0 is the
// bug this guards against). Suites run with FAKECUDA_DEVICES=2 and
// FAKECUDA_NUMA_NODES=2; the [managed-partial] topic also with device 1
// lacking CONCURRENT_MANAGED_ACCESS from the start (FAKECUDA_ATTR=89:0@1),
// since cudyn reads that attribute once per device, as a real driver never
// changes it.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/core/location.hpp"
#include "cudyn/memory/managed_range.hpp"
#include "cudyn/memory/memory_info.hpp"
#include "cudyn/memory/migration_policy.hpp"
#include "cudyn/memory/prefetch_plan.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/memory/managed_buffer.hpp"
#include "cudyn/memory/stream_attachment.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using cudyn::ErrorCode;
using cudyn::Location;
using namespace cudyn_test;  // FakeDriver, ScopedFault, activate, DriverSnapshot, require_error

namespace {

constexpr int kDevice = CU_MEM_LOCATION_TYPE_DEVICE;
constexpr int kHost = CU_MEM_LOCATION_TYPE_HOST;
constexpr int kHostNuma = CU_MEM_LOCATION_TYPE_HOST_NUMA;

// The emulated driver has the CUmemLocation (_v2) entries; cuda11 and legacy do not.
bool location_abi() { return FakeDriver::loaded().variant() == "emulated"; }

// How the fake logs Location::host(): exactly as passed through _v2 (id 0),
// decoded from CU_DEVICE_CPU through v1 (id -1).
int host_id() { return location_abi() ? 0 : CU_DEVICE_CPU; }
const char* advise_entry() { return location_abi() ? "cuMemAdvise_v2" : "cuMemAdvise"; }
const char* prefetch_entry() { return location_abi() ? "cuMemPrefetchAsync_v2" : "cuMemPrefetchAsync"; }

void check_record(const fakecuda_record& record, const std::string& entry, CUdeviceptr pointer, std::size_t bytes,
                  int type, int id) {
    INFO("record " << record.entry << " ptr " << record.ptr << " size " << record.size << " location "
                   << record.location_type << "/" << record.location_id);
    CHECK(record.entry == entry);
    CHECK(record.ptr == pointer);
    CHECK(record.size == bytes);
    CHECK(record.location_type == type);
    CHECK(record.location_id == id);
}

int range_attribute(CUmem_range_attribute attribute, CUdeviceptr pointer, std::size_t bytes) {
    int value = 12345;
    REQUIRE(cudyn::call_driver(&cudyn::DriverTable::cuMemRangeGetAttribute_v8000, static_cast<void*>(&value),
                               sizeof value, attribute, pointer, bytes)
                .has_value());
    return value;
}

struct ManagedFixture {
    cudyn::PrimaryContext context = activate(0);
    cudyn::Stream stream = make_stream();
    cudyn::ManagedBuffer<std::uint32_t> buffer;
    cudyn::ManagedRange hints = make();

    static cudyn::Stream make_stream() {
        auto created = cudyn::Stream::create();
        REQUIRE(created.has_value());
        return std::move(*created);
    }
    cudyn::ManagedRange make() {
        auto allocated = cudyn::ManagedBuffer<std::uint32_t>::allocate(4096);  // 16 KiB: four fake pages
        REQUIRE(allocated.has_value());
        buffer = std::move(*allocated);
        auto whole = buffer.managed_range();
        REQUIRE(whole.has_value());
        FakeDriver::loaded().clear_logs();
        return *whole;
    }
    CUdeviceptr base() const { return buffer.device_address(); }
};

// The [managed-partial] topic's machine: device 0 with concurrent managed
// access, device 1 without (what its Meson test sets up).
void require_partial_concurrent_access() {
    for (int ordinal : {0, 1}) {
        auto device = cudyn::Device::get(ordinal);
        REQUIRE(device.has_value());
        auto concurrent = device->attribute(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS);
        REQUIRE(concurrent.has_value());
        INFO("device " << ordinal);
        REQUIRE(*concurrent == (ordinal == 0 ? 1 : 0));
    }
}

}  // namespace

// --- ManagedBuffer -----------------------------------------------------------------------------

TEST_CASE("ManagedBuffer: host and device reach the same managed memory", "[emulated][cuda11][legacy][managed]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        auto buffer = cudyn::ManagedBuffer<std::uint32_t>::allocate(1024);
        REQUIRE(buffer.has_value());
        CHECK(buffer->size() == 1024);
        CHECK(buffer->attach() == cudyn::ManagedAttach::Global);
        CHECK(buffer->device_address() == static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(buffer->data())));
        CHECK(before.live_delta() == 1);
        for (std::size_t i = 0; i < buffer->size(); ++i) (*buffer)[i] = static_cast<std::uint32_t>(i + 11);

        // The device reads what the host wrote, and the host sees device writes.
        auto device = cudyn::DeviceBuffer<std::uint32_t>::allocate(1024);
        REQUIRE(device.has_value());
        REQUIRE(cudyn::call_driver(&cudyn::DriverTable::cuMemcpyDtoD_v3020, device->device_address(), buffer->device_address(),
                                   buffer->size_bytes())
                    .has_value());
        std::vector<std::uint32_t> back(1024);
        REQUIRE(device->copy_to(back).has_value());
        CHECK(back[0] == 11);
        CHECK(back[1023] == 1034);
        REQUIRE(cudyn::call_driver(&cudyn::DriverTable::cuMemsetD32_v3020, buffer->device_address() + 4, 99u,
                                   std::size_t{2})
                    .has_value());
        CHECK((*buffer)[0] == 11);
        CHECK((*buffer)[1] == 99);
        CHECK((*buffer)[2] == 99);
        CHECK((*buffer)[3] == 14);

        auto attributes = cudyn::pointer_attributes(buffer->data());
        REQUIRE(attributes.has_value());
        CHECK(attributes->is_managed);
        CHECK(attributes->device_ordinal == 0);

        auto host_attached = cudyn::ManagedBuffer<double>::allocate(16, cudyn::ManagedAttach::Host);
        REQUIRE(host_attached.has_value());
        CHECK(host_attached->attach() == cudyn::ManagedAttach::Host);
        auto part = buffer->managed_range(100, 20);
        REQUIRE(part.has_value());
        CHECK(part->device_address() == buffer->device_address() + 400);
        CHECK(part->size_bytes() == 80);
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("ManagedBuffer: bad input, use after move and driver failures leak nothing",
          "[emulated][cuda11][legacy][managed]") {
    auto context = activate(0);
    const DriverSnapshot before({"cuMemAllocManaged"});
    require_error(cudyn::ManagedBuffer<std::uint32_t>::allocate(0), ErrorCode::InvalidArgument,
                  "count must be non-zero");
    require_error(cudyn::ManagedBuffer<std::uint64_t>::allocate(std::numeric_limits<std::size_t>::max() / 8 + 1),
                  ErrorCode::InvalidArgument, "overflows");
    before.require_untouched();
    {
        ScopedFault fault("cuMemAllocManaged");
        require_error(cudyn::ManagedBuffer<std::uint32_t>::allocate(10), ErrorCode::OutOfMemory, "cuMemAllocManaged");
    }
    CHECK(before.live_delta() == 0);

    auto buffer = cudyn::ManagedBuffer<std::uint32_t>::allocate(10);
    REQUIRE(buffer.has_value());
    require_error(buffer->managed_range(5, 6), ErrorCode::InvalidArgument, "offset 5 + count 6 exceeds the size 10");
    require_error(buffer->managed_range(0, 0), ErrorCode::InvalidArgument, "count must be non-zero");
    cudyn::ManagedBuffer<std::uint32_t> moved = std::move(*buffer);
    CHECK(buffer->data() == nullptr);
    CHECK(buffer->device_address() == 0);
    require_error(buffer->managed_range(), ErrorCode::InvalidArgument, "moved from");
    CHECK(moved.managed_range().has_value());
    CHECK(before.live_delta() == 1);
    REQUIRE(moved.free().has_value());
    CHECK(before.live_delta() == 0);
}

// --- advice ----------------------------------------------------------------------------------

TEST_CASE("advice through cuMemAdvise_v2 records exactly the location asked", "[emulated][managed]") {
    const FakeDriver& fake = FakeDriver::loaded();
    ManagedFixture f;
    const std::size_t bytes = f.hints.size_bytes();
    REQUIRE(f.hints.set_read_mostly().has_value());
    REQUIRE(f.hints.set_preferred_location(Location::host()).has_value());
    CHECK(range_attribute(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, f.base(), bytes) == kHost);
    CHECK(range_attribute(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, f.base(), bytes) == CU_DEVICE_CPU);
    REQUIRE(f.hints.set_preferred_location(Location::device(1)).has_value());
    CHECK(range_attribute(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, f.base(), bytes) == kDevice);
    CHECK(range_attribute(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, f.base(), bytes) == 1);
    REQUIRE(f.hints.set_preferred_location(Location::host_numa(1)).has_value());
    CHECK(range_attribute(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, f.base(), bytes) == kHostNuma);
    CHECK(range_attribute(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, f.base(), bytes) == 1);
    REQUIRE(f.hints.set_accessed_by(Location::device(1)).has_value());
    REQUIRE(f.hints.unset_accessed_by(Location::device(1)).has_value());
    REQUIRE(f.hints.unset_preferred_location().has_value());
    REQUIRE(f.hints.unset_read_mostly().has_value());
    REQUIRE(f.hints.set_preferred_location(Location::host_numa_current()).has_value());

    REQUIRE(fake.advice_count() == 9);
    const struct {
        CUmem_advise advice;
        int type;
        int id;
    } expected[] = {
        {CU_MEM_ADVISE_SET_READ_MOSTLY, kHost, 0},
        {CU_MEM_ADVISE_SET_PREFERRED_LOCATION, kHost, 0},
        {CU_MEM_ADVISE_SET_PREFERRED_LOCATION, kDevice, 1},
        {CU_MEM_ADVISE_SET_PREFERRED_LOCATION, kHostNuma, 1},
        {CU_MEM_ADVISE_SET_ACCESSED_BY, kDevice, 1},
        {CU_MEM_ADVISE_UNSET_ACCESSED_BY, kDevice, 1},
        {CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, kHost, 0},
        {CU_MEM_ADVISE_UNSET_READ_MOSTLY, kHost, 0},
        {CU_MEM_ADVISE_SET_PREFERRED_LOCATION, CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT, 0},
    };
    for (int i = 0; i < 9; ++i) {
        INFO("advice " << i);
        const fakecuda_record record = fake.advice(i);
        check_record(record, "cuMemAdvise_v2", f.base(), bytes, expected[i].type, expected[i].id);
        CHECK(record.advice == expected[i].advice);
    }
    CHECK(fake.call_count("cuMemAdvise") == 0);  // the v1 entry is never used where _v2 exists
}

TEST_CASE("advice on a v1-only driver: host is CU_DEVICE_CPU, NUMA is NotSupported", "[cuda11][legacy][managed]") {
    const FakeDriver& fake = FakeDriver::loaded();
    ManagedFixture f;
    auto sub = f.hints.subrange(4096, 8192);
    REQUIRE(sub.has_value());
    REQUIRE(sub->set_preferred_location(Location::host()).has_value());
    CHECK(range_attribute(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, sub->device_address(), sub->size_bytes()) == CU_DEVICE_CPU);
    REQUIRE(sub->set_accessed_by(Location::device(1)).has_value());
    REQUIRE(fake.advice_count() == 2);
    check_record(fake.advice(0), "cuMemAdvise", f.base() + 4096, 8192, kHost, CU_DEVICE_CPU);
    CHECK(fake.advice(0).advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION);
    check_record(fake.advice(1), "cuMemAdvise", f.base() + 4096, 8192, kDevice, 1);
    CHECK(fake.advice(1).advice == CU_MEM_ADVISE_SET_ACCESSED_BY);

    const DriverSnapshot before({"cuMemAdvise"});
    for (const Location& numa : {Location::host_numa(1), Location::host_numa_current()}) {
        auto refused = f.hints.set_preferred_location(numa);
        require_error(refused, ErrorCode::NotSupported, "CUmemLocation ABI");
        CHECK(refused.error().entry_point == "cuMemAdvise");
    }
    before.require_untouched();
    CHECK(fake.advice_count() == 2);
}

TEST_CASE("MigrationPolicy gives exactly the policy in one call; PreferHost is the host",
          "[emulated][cuda11][legacy][managed]") {
    const FakeDriver& fake = FakeDriver::loaded();
    ManagedFixture f;
    const std::size_t bytes = f.hints.size_bytes();
    const auto applied = [&](const cudyn::MigrationPolicy& policy, CUmem_advise first, CUmem_advise second, int type,
                             int id) {
        INFO(policy.describe());
        fake.clear_logs();
        REQUIRE(policy.apply_to(f.hints).has_value());
        REQUIRE(fake.advice_count() == 2);
        CHECK(fake.advice(0).advice == first);
        CHECK(std::string(fake.advice(0).entry) == advise_entry());
        const fakecuda_record preferred = fake.advice(1);
        CHECK(preferred.advice == second);
        if (second == CU_MEM_ADVISE_SET_PREFERRED_LOCATION)
            check_record(preferred, advise_entry(), f.base(), bytes, type, id);
    };
    using Policy = cudyn::MigrationPolicy;
    applied(Policy::prefer_host(), CU_MEM_ADVISE_UNSET_READ_MOSTLY, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, kHost,
            host_id());
    CHECK(range_attribute(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, f.base(), bytes) == CU_DEVICE_CPU);
    const CUmem_advise unset_read_mostly = CU_MEM_ADVISE_UNSET_READ_MOSTLY;
    const CUmem_advise set_preferred = CU_MEM_ADVISE_SET_PREFERRED_LOCATION;
    applied(Policy::prefer_device(1), unset_read_mostly, set_preferred, kDevice, 1);
    CHECK(range_attribute(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, f.base(), bytes) == 1);
    applied(Policy::prefer_device(0), unset_read_mostly, set_preferred, kDevice, 0);
    applied(Policy::read_mostly(), CU_MEM_ADVISE_SET_READ_MOSTLY, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, 0, 0);
    CHECK(range_attribute(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, f.base(), bytes) == 1);
    CHECK(range_attribute(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, f.base(), bytes) == CU_DEVICE_INVALID);
    applied(Policy::driver_default(), CU_MEM_ADVISE_UNSET_READ_MOSTLY, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, 0, 0);
    CHECK(range_attribute(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, f.base(), bytes) == 0);

    CHECK(Policy::prefer_host().preferred_location() == Location::host());
    CHECK_FALSE(Policy::read_mostly().preferred_location().has_value());
    CHECK(Policy::prefer_host_numa(1).describe() == "prefer host NUMA node 1");

    fake.clear_logs();
    auto numa = Policy::prefer_host_numa(1).apply_to(f.hints);
    if (location_abi()) {
        REQUIRE(numa.has_value());
        REQUIRE(fake.advice_count() == 2);
        check_record(fake.advice(1), "cuMemAdvise_v2", f.base(), bytes, kHostNuma, 1);
    } else {
        // Refused before the first advice: the range keeps its previous policy.
        require_error(numa, ErrorCode::NotSupported, "host NUMA node 1");
        CHECK(fake.advice_count() == 0);
    }
}

TEST_CASE("advice locations and ranges are checked before the driver", "[emulated][cuda11][legacy][managed]") {
    const FakeDriver& fake = FakeDriver::loaded();
    ManagedFixture f;
    const DriverSnapshot before({"cuMemAdvise", "cuMemAdvise_v2"});
    require_error(f.hints.set_preferred_location(Location::device(2)), ErrorCode::InvalidArgument,
                  "device 2 is out of range");
    require_error(f.hints.set_accessed_by(Location::device(-1)), ErrorCode::InvalidArgument, "negative device ordinal");
    require_error(f.hints.set_preferred_location(Location::host_numa(-3)), ErrorCode::InvalidArgument,
                  "negative NUMA node");
    require_error(cudyn::MigrationPolicy::prefer_device(7).apply_to(f.hints), ErrorCode::InvalidArgument,
                  "device 7 is out of range");
    require_error(f.hints.advise({{static_cast<CUmem_advise>(0), Location::host()}}), ErrorCode::InvalidArgument,
                  "not a CUmem_advise");
    // A bad second step stops the first one too.
    require_error(f.hints.advise({{CU_MEM_ADVISE_SET_READ_MOSTLY, Location::host()},
                                  {CU_MEM_ADVISE_SET_ACCESSED_BY, Location::device(9)}}),
                  ErrorCode::InvalidArgument, "device 9");
    CHECK(fake.advice_count() == 0);
    before.require_untouched();

    require_error(cudyn::ManagedRange::over(0, 16), ErrorCode::InvalidArgument, "base is a null pointer");
    require_error(cudyn::ManagedRange::over(f.base(), 0), ErrorCode::InvalidArgument, "bytes must be non-zero");
    require_error(cudyn::ManagedRange::over(~CUdeviceptr{0} - 8, 16), ErrorCode::InvalidArgument, "wraps");
    require_error(f.hints.subrange(16384, 1), ErrorCode::InvalidArgument, "exceeds the size 16384");

    // The driver decides whether memory is managed: device memory is refused by it.
    auto device = cudyn::DeviceBuffer<std::uint32_t>::allocate(16);
    REQUIRE(device.has_value());
    auto not_managed = cudyn::ManagedRange::over(device->device_address(), device->size_bytes());
    REQUIRE(not_managed.has_value());
    auto refused = not_managed->set_read_mostly();
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().driver_result == CUDA_ERROR_INVALID_VALUE);
    CHECK(refused.error().entry_point == advise_entry());
}

// --- prefetch ----------------------------------------------------------------------------------

TEST_CASE("prefetch through cuMemPrefetchAsync_v2 records exactly the location and stream", "[emulated][prefetch]") {
    const FakeDriver& fake = FakeDriver::loaded();
    ManagedFixture f;
    const std::size_t bytes = f.hints.size_bytes();
    const auto last_prefetch = [&](CUmem_range_attribute attribute) {
        return range_attribute(attribute, f.base(), bytes);
    };

    REQUIRE(f.hints.prefetch_to(Location::device(1), f.stream).has_value());
    CHECK(last_prefetch(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE) == kDevice);
    CHECK(last_prefetch(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID) == 1);
    REQUIRE(f.hints.prefetch_to(Location::host(), f.stream).has_value());
    CHECK(last_prefetch(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE) == kHost);
    CHECK(last_prefetch(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION) == CU_DEVICE_CPU);
    REQUIRE(f.hints.prefetch_to(Location::host_numa(1), cudyn::Stream::per_thread_default()).has_value());
    CHECK(last_prefetch(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE) == kHostNuma);
    CHECK(last_prefetch(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID) == 1);
    REQUIRE(f.hints.prefetch_to(Location::device(0), CUstream{nullptr}).has_value());

    REQUIRE(fake.prefetch_count() == 4);
    check_record(fake.prefetch(0), "cuMemPrefetchAsync_v2", f.base(), bytes, kDevice, 1);
    CHECK(fake.prefetch(0).stream == reinterpret_cast<std::uintptr_t>(f.stream.handle()));
    CHECK(fake.prefetch(0).flags == 0);
    check_record(fake.prefetch(1), "cuMemPrefetchAsync_v2", f.base(), bytes, kHost, 0);
    check_record(fake.prefetch(2), "cuMemPrefetchAsync_v2", f.base(), bytes, kHostNuma, 1);
    CHECK(fake.prefetch(2).stream == reinterpret_cast<std::uintptr_t>(CU_STREAM_PER_THREAD));
    check_record(fake.prefetch(3), "cuMemPrefetchAsync_v2", f.base(), bytes, kDevice, 0);
    CHECK(fake.prefetch(3).stream == 0);
    CHECK(fake.call_count("cuMemPrefetchAsync") == 0);
}

TEST_CASE("prefetch on a v1-only driver: host is CU_DEVICE_CPU, NUMA is NotSupported", "[cuda11][legacy][prefetch]") {
    const FakeDriver& fake = FakeDriver::loaded();
    ManagedFixture f;
    REQUIRE(f.hints.prefetch_to(Location::host(), f.stream).has_value());
    REQUIRE(f.hints.prefetch_range(8192, 4096, Location::device(1), f.stream).has_value());
    REQUIRE(fake.prefetch_count() == 2);
    check_record(fake.prefetch(0), "cuMemPrefetchAsync", f.base(), f.hints.size_bytes(), kHost, CU_DEVICE_CPU);
    CHECK(fake.prefetch(0).stream == reinterpret_cast<std::uintptr_t>(f.stream.handle()));
    check_record(fake.prefetch(1), "cuMemPrefetchAsync", f.base() + 8192, 4096, kDevice, 1);
    CHECK(range_attribute(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, f.base() + 8192, 4096) == 1);

    const DriverSnapshot before({"cuMemPrefetchAsync"});
    auto refused = f.hints.prefetch_to(Location::host_numa(0), f.stream);
    require_error(refused, ErrorCode::NotSupported, "needs the CUmemLocation ABI");
    CHECK(refused.error().entry_point == "cuMemPrefetchAsync");
    require_error(f.hints.prefetch_to(Location::host_numa_current(), f.stream), ErrorCode::NotSupported, "NUMA");
    before.require_untouched();
    CHECK(fake.prefetch_count() == 2);
}

TEST_CASE("prefetch_range is bounds-checked before any driver call", "[emulated][cuda11][legacy][prefetch]") {
    const FakeDriver& fake = FakeDriver::loaded();
    ManagedFixture f;
    const DriverSnapshot before({"cuMemPrefetchAsync", "cuMemPrefetchAsync_v2", "cuDeviceGetAttribute"});
    const auto host = Location::host();
    require_error(f.hints.prefetch_range(16384, 1, host, CUstream{nullptr}), ErrorCode::InvalidArgument,
                  "offset 16384 + count 1 exceeds the size 16384");
    require_error(f.hints.prefetch_range(1, 16384, host, CUstream{nullptr}), ErrorCode::InvalidArgument, "exceeds");
    require_error(f.hints.prefetch_range(0, 0, host, CUstream{nullptr}), ErrorCode::InvalidArgument,
                  "count must be non-zero");
    require_error(f.hints.prefetch_range(std::numeric_limits<std::size_t>::max(), 2, host, CUstream{nullptr}),
                  ErrorCode::InvalidArgument, "exceeds");
    require_error(f.hints.prefetch_to(Location::device(2), CUstream{nullptr}), ErrorCode::InvalidArgument,
                  "device 2 is out of range");
    require_error(f.hints.prefetch_to(Location::device(-1), CUstream{nullptr}), ErrorCode::InvalidArgument,
                  "negative device ordinal");
    before.require_untouched();
    CHECK(fake.prefetch_count() == 0);

    REQUIRE(f.hints.prefetch_range(16380, 4, host, CUstream{nullptr}).has_value());  // the last element
    REQUIRE(fake.prefetch_count() == 1);
    CHECK(fake.prefetch(0).ptr == f.base() + 16380);
    CHECK(fake.prefetch(0).size == 4);
}

TEST_CASE("advice and prefetch read a device's facts from the driver once", "[emulated][cuda11][legacy][managed]") {
    ManagedFixture f;
    // The first use may ask (or another test in this process already did).
    REQUIRE(f.hints.set_preferred_location(Location::device(1)).has_value());
    REQUIRE(f.hints.prefetch_to(Location::device(0), f.stream).has_value());
    const DriverSnapshot before({"cuDeviceGetAttribute", "cuDeviceGetCount", "cuDeviceGet"});
    for (int i = 0; i < 3; ++i) {
        REQUIRE(f.hints.set_preferred_location(Location::device(1)).has_value());
        REQUIRE(f.hints.set_accessed_by(Location::device(0)).has_value());
        REQUIRE(f.hints.prefetch_to(Location::device(1), f.stream).has_value());
    }
    CHECK(before.calls_since("cuDeviceGetAttribute") == 0);
    CHECK(before.calls_since("cuDeviceGetCount") == 0);
    CHECK(before.calls_since("cuDeviceGet") == 0);
    // An ordinal out of range is still refused with the count in the message.
    require_error(f.hints.set_preferred_location(Location::device(2)), ErrorCode::InvalidArgument,
                  "device 2 is out of range: 2 device(s) visible");
}

TEST_CASE("advice that places or maps memory on a device without concurrent managed access is NotSupported",
          "[emulated][cuda11][legacy][managed-partial]") {
    const FakeDriver& fake = FakeDriver::loaded();
    ManagedFixture f;
    require_partial_concurrent_access();
    auto preferred = f.hints.set_preferred_location(Location::device(1));
    auto accessed = f.hints.set_accessed_by(Location::device(1));
    auto read_mostly = f.hints.set_read_mostly();                           // takes no device
    auto on_host = f.hints.set_preferred_location(Location::host());       // needs no device attribute
    auto on_other = f.hints.set_accessed_by(Location::device(0));          // device 0 has it
    require_error(preferred, ErrorCode::NotSupported, "device 1 lacks CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS");
    require_error(accessed, ErrorCode::NotSupported, "preferred location or mapping");
    CHECK(read_mostly.has_value());
    CHECK(on_host.has_value());
    CHECK(on_other.has_value());
    // The refused advices never reached the driver: only the three others did.
    REQUIRE(fake.advice_count() == 3);
    CHECK(fake.advice(0).advice == CU_MEM_ADVISE_SET_READ_MOSTLY);
    CHECK(fake.advice(1).advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION);
    CHECK(fake.advice(2).advice == CU_MEM_ADVISE_SET_ACCESSED_BY);
}

TEST_CASE("prefetch to a device without concurrent managed access is NotSupported",
          "[emulated][cuda11][legacy][managed-partial]") {
    const FakeDriver& fake = FakeDriver::loaded();
    ManagedFixture f;
    require_partial_concurrent_access();
    const DriverSnapshot before({"cuMemPrefetchAsync", "cuMemPrefetchAsync_v2"});
    auto refused = f.hints.prefetch_to(Location::device(1), CUstream{nullptr});
    auto ranged = f.hints.prefetch_range(0, 4096, Location::device(1), CUstream{nullptr});
    auto host = f.hints.prefetch_to(Location::host(), CUstream{nullptr});       // needs no device attribute
    auto other = f.hints.prefetch_to(Location::device(0), CUstream{nullptr});  // device 0 has it
    require_error(refused, ErrorCode::NotSupported, "device 1 lacks CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS");
    require_error(ranged, ErrorCode::NotSupported, "CONCURRENT_MANAGED_ACCESS");
    CHECK(refused.error().entry_point == prefetch_entry());
    CHECK(host.has_value());
    CHECK(other.has_value());
    CHECK(before.calls_since(prefetch_entry()) == 2);
    REQUIRE(fake.prefetch_count() == 2);
    check_record(fake.prefetch(0), prefetch_entry(), f.base(), f.hints.size_bytes(), kHost, host_id());
    check_record(fake.prefetch(1), prefetch_entry(), f.base(), f.hints.size_bytes(), kDevice, 0);
}

// --- PrefetchPlan ------------------------------------------------------------------------------

namespace {

// Four 4 KiB ranges of the fixture's buffer, to device 1 and the host in turn.
cudyn::PrefetchPlan alternating_plan(const ManagedFixture& f, const Location& other) {
    cudyn::PrefetchPlan plan;
    for (std::size_t i = 0; i < 4; ++i) {
        auto range = f.hints.subrange(i * 4096, 4096);
        REQUIRE(range.has_value());
        REQUIRE(plan.add(*range, i % 2 == 0 ? Location::device(1) : other).has_value());
    }
    CHECK(plan.size() == 4);
    return plan;
}

}  // namespace

TEST_CASE("PrefetchPlan is one cuMemPrefetchBatchAsync on a 13.0 driver", "[emulated][prefetch]") {
    const FakeDriver& fake = FakeDriver::loaded();
    ManagedFixture f;
    const cudyn::PrefetchPlan plan = alternating_plan(f, Location::host_numa(1));
    const DriverSnapshot before({"cuMemPrefetchBatchAsync", "cuMemPrefetchAsync_v2", "cuMemPrefetchAsync"});
    REQUIRE(plan.execute(f.stream).has_value());
    CHECK(before.calls_since("cuMemPrefetchBatchAsync") == 1);
    CHECK(before.calls_since("cuMemPrefetchAsync_v2") == 0);
    CHECK(before.calls_since("cuMemPrefetchAsync") == 0);

    REQUIRE(fake.prefetch_count() == 4);
    for (int i = 0; i < 4; ++i) {
        const fakecuda_record record = fake.prefetch(i);
        INFO("range at " << record.ptr - f.base());
        CHECK(std::string(record.entry) == "cuMemPrefetchBatchAsync");
        CHECK(record.call_seq == fake.prefetch(0).call_seq);  // one call
        CHECK(record.stream == reinterpret_cast<std::uintptr_t>(f.stream.handle()));
        CHECK(record.size == 4096);
        // Each range went where it was asked, whatever order the batch grouped them in.
        const bool to_device = (record.ptr - f.base()) / 4096 % 2 == 0;
        CHECK(record.location_type == (to_device ? kDevice : kHostNuma));
        CHECK(record.location_id == 1);
    }
    for (std::size_t page = 0; page < 4; ++page) {
        const int type =
            range_attribute(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE, f.base() + page * 4096, 4096);
        CHECK(type == (page % 2 == 0 ? kDevice : kHostNuma));
    }

    ScopedFault fault("cuMemPrefetchBatchAsync:1:CUDA_ERROR_INVALID_VALUE");
    auto failed = plan.execute(f.stream);
    REQUIRE_FALSE(failed.has_value());
    CHECK(failed.error().entry_point == "cuMemPrefetchBatchAsync");
}

TEST_CASE("PrefetchPlan falls back to one call per range where the batch cannot serve", "[emulated][prefetch]") {
    const FakeDriver& fake = FakeDriver::loaded();
    ManagedFixture f;
    const cudyn::PrefetchPlan plan = alternating_plan(f, Location::host());
    {
        // The batch entry refuses the legacy NULL stream.
        const DriverSnapshot before({"cuMemPrefetchBatchAsync", "cuMemPrefetchAsync_v2"});
        REQUIRE(plan.execute(cudyn::Stream::legacy_default()).has_value());
        REQUIRE(plan.execute(CUstream{nullptr}).has_value());
        CHECK(before.calls_since("cuMemPrefetchBatchAsync") == 0);
        CHECK(before.calls_since("cuMemPrefetchAsync_v2") == 8);
    }
    REQUIRE(fake.prefetch_count() == 8);
    check_record(fake.prefetch(0), "cuMemPrefetchAsync_v2", f.base(), 4096, kDevice, 1);
    check_record(fake.prefetch(1), "cuMemPrefetchAsync_v2", f.base() + 4096, 4096, kHost, 0);
    check_record(fake.prefetch(3), "cuMemPrefetchAsync_v2", f.base() + 3 * 4096, 4096, kHost, 0);
}

TEST_CASE("PrefetchPlan goes range by range when any device lacks concurrent managed access",
          "[emulated][managed-partial]") {
    ManagedFixture f;
    require_partial_concurrent_access();
    // The batch needs CONCURRENT_MANAGED_ACCESS on every device, not only the
    // targets: with device 1 lacking it, a host-only plan goes range by range.
    cudyn::PrefetchPlan host_only;
    REQUIRE(host_only.add(f.hints, Location::host()).has_value());
    REQUIRE(host_only.add(f.hints, Location::host_numa(0)).has_value());
    const DriverSnapshot before({"cuMemPrefetchBatchAsync", "cuMemPrefetchAsync_v2"});
    REQUIRE(host_only.execute(f.stream).has_value());
    CHECK(before.calls_since("cuMemPrefetchBatchAsync") == 0);
    CHECK(before.calls_since("cuMemPrefetchAsync_v2") == 2);
}

TEST_CASE("PrefetchPlan is one v1 call per range on cuda11 and legacy", "[cuda11][legacy][prefetch]") {
    const FakeDriver& fake = FakeDriver::loaded();
    ManagedFixture f;
    const cudyn::PrefetchPlan plan = alternating_plan(f, Location::host());
    const DriverSnapshot before({"cuMemPrefetchAsync"});
    REQUIRE(plan.execute(f.stream).has_value());
    CHECK(before.calls_since("cuMemPrefetchAsync") == 4);
    CHECK(fake.call_count("cuMemPrefetchBatchAsync") == 0);
    REQUIRE(fake.prefetch_count() == 4);
    for (int i = 0; i < 4; ++i) {
        INFO("range " << i);
        const bool to_device = i % 2 == 0;
        check_record(fake.prefetch(i), "cuMemPrefetchAsync", f.base() + static_cast<CUdeviceptr>(i) * 4096, 4096,
                     to_device ? kDevice : kHost, to_device ? 1 : CU_DEVICE_CPU);
        CHECK(fake.prefetch(i).stream == reinterpret_cast<std::uintptr_t>(f.stream.handle()));
    }
}

TEST_CASE("PrefetchPlan checks every location before the first prefetch", "[emulated][cuda11][legacy][prefetch]") {
    const FakeDriver& fake = FakeDriver::loaded();
    ManagedFixture f;
    cudyn::PrefetchPlan plan;
    require_error(plan.execute(f.stream), ErrorCode::InvalidArgument, "the plan is empty");
    require_error(plan.add(f.hints, Location::device(-2)), ErrorCode::InvalidArgument, "PrefetchPlan::add: location");
    CHECK(plan.empty());

    // A valid first range does not go out when a later one is refused.
    REQUIRE(plan.add(f.hints, Location::host()).has_value());
    REQUIRE(plan.add(f.hints, Location::device(5)).has_value());
    require_error(plan.execute(f.stream), ErrorCode::InvalidArgument, "device 5 is out of range");
    CHECK(fake.prefetch_count() == 0);
    plan.clear();
    CHECK(plan.empty());

    REQUIRE(plan.add(f.hints, Location::host()).has_value());
    REQUIRE(plan.add(f.hints, Location::host_numa(1)).has_value());
    auto numa = plan.execute(f.stream);
    if (location_abi()) {
        REQUIRE(numa.has_value());
        CHECK(fake.prefetch_count() == 2);
    } else {
        require_error(numa, ErrorCode::NotSupported, "host NUMA node 1");
        CHECK(fake.prefetch_count() == 0);
    }
}

TEST_CASE("PrefetchPlan refuses a device without concurrent managed access before the first prefetch",
          "[emulated][cuda11][legacy][managed-partial]") {
    const FakeDriver& fake = FakeDriver::loaded();
    ManagedFixture f;
    require_partial_concurrent_access();
    cudyn::PrefetchPlan plan;
    REQUIRE(plan.add(f.hints, Location::host()).has_value());
    REQUIRE(plan.add(f.hints, Location::device(1)).has_value());
    require_error(plan.execute(f.stream), ErrorCode::NotSupported,
                  "device 1 lacks CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS");
    CHECK(fake.prefetch_count() == 0);
}

// ---- attachment to a stream ---------------------------------------------------------------------

TEST_CASE("attach_to_stream: the association changes in stream order; what the host may touch follows it",
          "[emulated][cuda11][legacy][managed]") {
    auto context = activate(0);
    auto buffer = take(cudyn::ManagedBuffer<std::uint32_t>::allocate(1024));
    const CUdeviceptr base = buffer.device_address();
    const auto& fake = FakeDriver::loaded();
    CHECK(fake.managed_attachment(base) == CU_MEM_ATTACH_GLOBAL);
    auto mine = take(cudyn::Stream::create(false));
    auto other = take(cudyn::Stream::create(false));
    {
        const ScopedStreamDelay slow(50'000);
        require_ok(cudyn::attach_to_stream(buffer, cudyn::StreamAttachment::Single, mine));
        CHECK(fake.managed_attachment(base) == CU_MEM_ATTACH_GLOBAL);  // not yet: stream work
        require_ok(mine.synchronize());
        CHECK(fake.managed_attachment(base) == CU_MEM_ATTACH_SINGLE);
        // Work on another stream does not keep the host from memory attached to `mine`.
        auto scratch = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(16));
        require_ok(scratch.fill(0u));
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemsetD32Async_v3020, scratch.device_address(), 1u,
                                      std::size_t{16}, other.handle()));
        CHECK(fake.host_may_touch(base) == 1);
        // Work on `mine` does, until it is done.
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemsetD32Async_v3020, scratch.device_address(), 2u,
                                      std::size_t{16}, mine.handle()));
        CHECK(fake.host_may_touch(base) == 0);
        require_ok(mine.synchronize());
        CHECK(fake.host_may_touch(base) == 1);
        // Global: any busy stream of the context keeps the host out.
        require_ok(cudyn::attach_to_stream(buffer, cudyn::StreamAttachment::Global, mine));
        require_ok(mine.synchronize());
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemsetD32Async_v3020, scratch.device_address(), 3u,
                                      std::size_t{16}, other.handle()));
        CHECK(fake.host_may_touch(base) == 0);
        require_ok(other.synchronize());
        // Host: always.
        require_ok(cudyn::attach_to_stream(buffer, cudyn::StreamAttachment::Host, other));
        require_ok(other.synchronize());
        CHECK(fake.managed_attachment(base) == CU_MEM_ATTACH_HOST);
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemsetD32Async_v3020, scratch.device_address(), 4u,
                                      std::size_t{16}, other.handle()));
        CHECK(fake.host_may_touch(base) == 1);
        require_ok(other.synchronize());
    }
}

TEST_CASE("attach_to_stream refusals: empty buffer, Single on the legacy stream, unknown attachment",
          "[emulated][cuda11][legacy][managed]") {
    auto context = activate(0);
    auto buffer = take(cudyn::ManagedBuffer<std::uint32_t>::allocate(16));
    const DriverSnapshot calls({"cuStreamAttachMemAsync"});
    require_error(cudyn::attach_to_stream(cudyn::ManagedBuffer<std::uint32_t>(), cudyn::StreamAttachment::Global,
                                          cudyn::Stream::legacy_default()),
                  cudyn::ErrorCode::InvalidArgument, "attach_to_stream: the buffer is empty");
    require_error(cudyn::attach_to_stream(buffer, cudyn::StreamAttachment::Single, cudyn::Stream::legacy_default()),
                  cudyn::ErrorCode::InvalidArgument, "not the legacy default stream");
    require_error(cudyn::attach_to_stream(buffer, cudyn::StreamAttachment::Single, CUstream{nullptr}),
                  cudyn::ErrorCode::InvalidArgument, "not the legacy default stream");
    require_error(cudyn::attach_to_stream(buffer, static_cast<cudyn::StreamAttachment>(8), cudyn::Stream::legacy_default()),
                  cudyn::ErrorCode::InvalidArgument, "attachment 8 is not Global, Host or Single");
    CHECK(calls.calls_since("cuStreamAttachMemAsync") == 0);
    // Global and Host on the legacy stream are fine.
    require_ok(cudyn::attach_to_stream(buffer, cudyn::StreamAttachment::Host, cudyn::Stream::legacy_default()));
    require_ok(cudyn::Stream::legacy_default().synchronize());
    CHECK(FakeDriver::loaded().managed_attachment(buffer.device_address()) == CU_MEM_ATTACH_HOST);
}
