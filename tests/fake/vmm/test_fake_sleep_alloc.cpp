// The sleeping allocator (libcudyn-torch) on the emulated fake driver,
// through its C entry points as PyTorch and ctypes call them: allocations
// rounded to the granularity, tags, sleep (offloaded tags copied to host,
// physical memory released, addresses kept) and wake at the same addresses,
// refusals, a failure half-way through wake_up and sleep, the bounded cache,
// and nothing left behind.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/core/memory_ledger.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/sleep_alloc/cudyn_torch.h"
#include "cudyn/sleep_alloc/sleeping_allocator.hpp"

#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

using cudyn::ErrorCode;
using cudyn_test::activate;
using cudyn_test::all_equal;
using cudyn_test::DriverSnapshot;
using cudyn_test::FakeDriver;
using cudyn_test::fill32;
using cudyn_test::kMiB;
using cudyn_test::ScopedFault;

namespace {

constexpr int kInvalidArgument = static_cast<int>(ErrorCode::InvalidArgument) + 1;
constexpr int kOutOfMemory = static_cast<int>(ErrorCode::OutOfMemory) + 1;

// A clean allocator before and after each test: the C entry points share one.
struct CleanAllocator {
    CleanAllocator() { REQUIRE(cudyn_torch_reset() == 0); }
    ~CleanAllocator() { cudyn_torch_reset(); }
};

// A test's setting: device 0's context current, a clean allocator, and the
// fake's live objects (and the calls of `entries`) counted from the start.
struct Session {
    cudyn::PrimaryContext context = activate(0);
    CleanAllocator clean;
    DriverSnapshot before;
    explicit Session(std::initializer_list<const char*> entries = {}) : before(entries) {}
};

CUdeviceptr alloc(std::size_t bytes, int device = 0) {
    void* address = cudyn_torch_alloc(static_cast<ssize_t>(bytes), device, nullptr);
    INFO(cudyn_torch_last_error());
    REQUIRE(address != nullptr);
    return reinterpret_cast<CUdeviceptr>(address);
}

void release(CUdeviceptr address, std::size_t bytes, int device = 0) {
    cudyn_torch_free(reinterpret_cast<void*>(address), static_cast<ssize_t>(bytes), device, nullptr);
    INFO(cudyn_torch_last_error());
    REQUIRE(std::string(cudyn_torch_last_error()).empty());
}

void tag(const char* name) {
    INFO(name);
    REQUIRE(cudyn_torch_set_tag(name) == 0);
}

// The call failed with `code` and its message mentions `mentions`.
void require_refused(int answer, int code, const std::string& mentions) {
    const std::string text = cudyn_torch_last_error();
    INFO(text);
    CHECK(answer == code);
    CHECK(text.find(mentions) != std::string::npos);
}

int sleep_offloading(std::vector<const char*> tags, cudyn_torch_report* report = nullptr) {
    return cudyn_torch_sleep(tags.data(), static_cast<int>(tags.size()), report);
}

int wake(std::vector<const char*> tags, cudyn_torch_report* report = nullptr) {
    return cudyn_torch_wake_up(tags.data(), static_cast<int>(tags.size()), report);
}

std::map<std::string, cudyn_torch_tag_stats> stats_by_tag() {
    const int count = cudyn_torch_stats(nullptr, 0);
    REQUIRE(count >= 0);
    std::vector<cudyn_torch_tag_stats> rows(static_cast<std::size_t>(count));
    REQUIRE(cudyn_torch_stats(rows.data(), count) == count);
    std::map<std::string, cudyn_torch_tag_stats> out;
    for (const auto& row : rows) out[std::string(row.tag) + "@" + std::to_string(row.device)] = row;
    return out;
}

// Mappings the ledger counts live; 0 where it does not count (-Dledger=false).
std::uint64_t vmm_mapped_live_count() {
    return cudyn::ledger::snapshot().of(cudyn::MemoryKind::VmmMapped).live_count;
}

}  // namespace

TEST_CASE("sleep-alloc: allocations are VMM mappings rounded to the granularity, given back at free",
          "[emulated][sleep-alloc]") {
    const Session session({"cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease",
                                 "cuMemAddressFree"});
    const DriverSnapshot& before = session.before;
    const auto mapped_before = vmm_mapped_live_count();
    {
        const CUdeviceptr small = alloc(1000);  // rounded up to one 2 MiB granule
        const CUdeviceptr large = alloc(5 * kMiB);
        CHECK(small % (2 * kMiB) == 0);
        CHECK(large % (2 * kMiB) == 0);
        CHECK(before.calls_since("cuMemCreate") == 2);
        CHECK(before.calls_since("cuMemMap") == 2);
        CHECK(before.calls_since("cuMemSetAccess") == 2);
        CHECK(vmm_mapped_live_count() == mapped_before + (cudyn::ledger::enabled() ? 2 : 0));
        fill32(large, 6 * kMiB, 7u);  // the whole rounded size is usable
        CHECK(all_equal(large, 6 * kMiB, 7u));

        auto rows = stats_by_tag();
        REQUIRE(rows.count("default@0") == 1);
        CHECK(rows["default@0"].live_bytes == 8 * kMiB);
        CHECK(rows["default@0"].live_count == 2);
        CHECK(rows["default@0"].awake_bytes == 8 * kMiB);
        CHECK(rows["default@0"].sleeping_bytes == 0);

        release(small, 1000);
        release(large, 5 * kMiB);
        CHECK(before.calls_since("cuMemUnmap") == 2);
        CHECK(before.calls_since("cuMemRelease") == 2);
        CHECK(before.calls_since("cuMemAddressFree") == 2);
        rows = stats_by_tag();
        CHECK(rows["default@0"].live_bytes == 0);
        CHECK(rows["default@0"].peak_bytes == 8 * kMiB);
    }
    CHECK(before.live_delta() == 0);
    CHECK(vmm_mapped_live_count() == mapped_before);
}

TEST_CASE("sleep-alloc: bad arguments are refused before the driver, saying why", "[emulated][sleep-alloc]") {
    const Session session({"cuMemCreate", "cuMemAddressReserve"});
    const DriverSnapshot& before = session.before;
    CHECK(cudyn_torch_alloc(0, 0, nullptr) == nullptr);
    CHECK(std::string(cudyn_torch_last_error()).find("cudyn_torch_alloc: size 0 is not positive") != std::string::npos);
    CHECK(cudyn_torch_alloc(-5, 0, nullptr) == nullptr);
    CHECK(cudyn_torch_alloc(4096, -1, nullptr) == nullptr);
    CHECK(std::string(cudyn_torch_last_error()).find("SleepingAllocator::allocate: device ordinal -1 is negative") !=
          std::string::npos);
    CHECK(cudyn_torch_alloc(4096, 7, nullptr) == nullptr);  // two fake devices
    CHECK(std::string(cudyn_torch_last_error()).find("out of range") != std::string::npos);
    CHECK(before.calls_since("cuMemCreate") == 0);
    CHECK(before.calls_since("cuMemAddressReserve") == 0);

    cudyn_torch_free(reinterpret_cast<void*>(std::uintptr_t{0x1234}), 16, 0, nullptr);
    CHECK(std::string(cudyn_torch_last_error()).find("SleepingAllocator::free: 0x1234 is not the start of a live allocation") !=
          std::string::npos);

    require_refused(cudyn_torch_set_tag(""), kInvalidArgument, "SleepingAllocator::set_tag: the tag is empty");
    require_refused(cudyn_torch_set_tag(std::string(64, 'x').c_str()), kInvalidArgument, "at most 63");
    require_refused(cudyn_torch_set_tag(nullptr), kInvalidArgument, "the tag is null");
    require_refused(cudyn_torch_set_peers(0, nullptr, 1), kInvalidArgument, "peers is null");
    const int self[] = {0};
    require_refused(cudyn_torch_set_peers(0, self, 1), kInvalidArgument, "is the device itself");
    require_refused(cudyn_torch_stats(nullptr, 3), -1, "cudyn_torch_stats: no room for rows");
    const char* null_tag[] = {nullptr};
    require_refused(cudyn_torch_sleep(null_tag, 1, nullptr), kInvalidArgument, "tag 0 is null");
    require_refused(cudyn_torch_wake_up(null_tag, -1, nullptr), kInvalidArgument, "tag count -1 is negative");
    const char* const* none_named = null_tag;  // not null, so not "every tag"
    require_refused(cudyn_torch_wake_up(none_named, 0, nullptr), kInvalidArgument, "no tag named");

    char current[8];
    REQUIRE(cudyn_torch_get_tag(current, sizeof(current)) == 0);
    CHECK(std::string(current) == "default");
    CHECK(before.live_delta() == 0);
}

TEST_CASE("sleep-alloc: sleep releases the memory and keeps the addresses; wake_up brings offloaded bytes back",
          "[emulated][sleep-alloc]") {
    const Session session;
    const DriverSnapshot& before = session.before;
    tag("weights");
    const CUdeviceptr w1 = alloc(4 * kMiB);
    const CUdeviceptr w2 = alloc(2 * kMiB);
    tag("kv_cache");
    const CUdeviceptr kv = alloc(6 * kMiB);
    fill32(w1, 4 * kMiB, 0xA1u);
    fill32(w2, 2 * kMiB, 0xA2u);
    fill32(kv, 6 * kMiB, 0xCCu);
    const long awake_objects = FakeDriver::loaded().live_allocations();

    cudyn_torch_report report{};
    REQUIRE(sleep_offloading({"weights"}, &report) == 0);
    CHECK(report.allocations == 3);
    CHECK(report.bytes == 12 * kMiB);
    CHECK(report.offloaded_bytes == 6 * kMiB);
    // Three mappings and three physical handles gone; two pinned copies held.
    CHECK(FakeDriver::loaded().live_allocations() == awake_objects - 6 + 2);
    CHECK(cudyn_test::touch_in_child(w1, false) == SIGSEGV);  // the addresses map nothing now
    auto rows = stats_by_tag();
    CHECK(rows["weights@0"].sleeping_bytes == 6 * kMiB);
    CHECK(rows["weights@0"].offloaded_bytes == 6 * kMiB);
    CHECK(rows["weights@0"].awake_bytes == 0);
    CHECK(rows["kv_cache@0"].sleeping_bytes == 6 * kMiB);
    CHECK(rows["kv_cache@0"].offloaded_bytes == 0);
    CHECK(rows["kv_cache@0"].live_bytes == 6 * kMiB);  // still allocated

    require_refused(sleep_offloading({}), kInvalidArgument, "SleepingAllocator::sleep: already asleep");
    require_refused(wake({"lora"}), kInvalidArgument, "SleepingAllocator::wake_up: unknown tag 'lora'");
    require_refused(sleep_offloading({"lora"}), kInvalidArgument, "unknown tag 'lora'");

    // Weights first, at the same addresses, with their bytes.
    REQUIRE(wake({"weights"}, &report) == 0);
    CHECK(report.allocations == 2);
    CHECK(report.offloaded_bytes == 6 * kMiB);
    CHECK(all_equal(w1, 4 * kMiB, 0xA1u));
    CHECK(all_equal(w2, 2 * kMiB, 0xA2u));
    require_refused(wake({"weights"}), kInvalidArgument, "already awake: no allocation of tag(s) 'weights' is asleep");
    rows = stats_by_tag();
    CHECK(rows["weights@0"].awake_bytes == 6 * kMiB);
    CHECK(rows["weights@0"].offloaded_bytes == 0);
    CHECK(rows["kv_cache@0"].sleeping_bytes == 6 * kMiB);

    // Then the rest; the KV cache's bytes were not kept, its memory is usable.
    REQUIRE(cudyn_torch_wake_up(nullptr, 0, &report) == 0);
    CHECK(report.allocations == 1);
    CHECK(report.offloaded_bytes == 0);
    fill32(kv, 6 * kMiB, 0xDDu);
    CHECK(all_equal(kv, 6 * kMiB, 0xDDu));
    CHECK(FakeDriver::loaded().live_allocations() == awake_objects);
    require_refused(cudyn_torch_wake_up(nullptr, 0, nullptr), kInvalidArgument, "already awake: no allocation of any tag");

    // A partial wake, then sleep again: only what is awake sleeps.
    REQUIRE(sleep_offloading({"weights"}) == 0);
    REQUIRE(wake({"weights"}) == 0);
    REQUIRE(sleep_offloading({"weights"}, &report) == 0);
    CHECK(report.allocations == 2);
    REQUIRE(cudyn_torch_wake_up(nullptr, 0, &report) == 0);
    CHECK(report.allocations == 3);
    CHECK(all_equal(w1, 4 * kMiB, 0xA1u));

    release(w1, 4 * kMiB);
    release(w2, 2 * kMiB);
    release(kv, 6 * kMiB);
    CHECK(before.live_delta() == 0);
}

TEST_CASE("sleep-alloc: an allocation freed while asleep gives back its addresses and its host copy",
          "[emulated][sleep-alloc]") {
    const Session session;
    const DriverSnapshot& before = session.before;
    tag("weights");
    const CUdeviceptr w = alloc(2 * kMiB);
    const CUdeviceptr kept = alloc(2 * kMiB);
    fill32(kept, 2 * kMiB, 5u);
    REQUIRE(sleep_offloading({"weights"}) == 0);
    release(w, 2 * kMiB);
    auto rows = stats_by_tag();
    CHECK(rows["weights@0"].live_count == 1);
    CHECK(rows["weights@0"].sleeping_count == 1);
    CHECK(rows["weights@0"].offloaded_bytes == 2 * kMiB);
    REQUIRE(cudyn_torch_wake_up(nullptr, 0, nullptr) == 0);
    CHECK(all_equal(kept, 2 * kMiB, 5u));
    release(kept, 2 * kMiB);
    CHECK(before.live_delta() == 0);
}

TEST_CASE("sleep-alloc: a cuMemCreate failing half-way through wake_up leaves each allocation awake or asleep, "
          "and a retry wakes the rest",
          "[emulated][sleep-alloc]") {
    const Session session;
    const DriverSnapshot& before = session.before;
    tag("weights");
    std::vector<CUdeviceptr> weights;
    for (std::uint32_t i = 0; i < 4; ++i) weights.push_back(alloc(2 * kMiB));
    // Woken in address order: the first two below are the ones that wake.
    std::sort(weights.begin(), weights.end());
    for (std::uint32_t i = 0; i < 4; ++i) fill32(weights[i], 2 * kMiB, 0x100u + i);
    REQUIRE(sleep_offloading({"weights"}) == 0);
    const long asleep_objects = FakeDriver::loaded().live_allocations();
    {
        const ScopedFault fault("cuMemCreate:3");  // the third wakes no more: out of memory
        require_refused(cudyn_torch_wake_up(nullptr, 0, nullptr), kOutOfMemory,
                        "2 allocation(s) woke with their bytes, 2 still asleep with their host copies");
        CHECK(std::string(cudyn_torch_last_error()).find("SleepingAllocator::wake_up") != std::string::npos);
        CHECK(std::string(cudyn_torch_last_error()).find("cuMemCreate") != std::string::npos);
    }
    auto rows = stats_by_tag();
    CHECK(rows["weights@0"].awake_bytes == 4 * kMiB);
    CHECK(rows["weights@0"].sleeping_count == 2);
    CHECK(rows["weights@0"].offloaded_bytes == 4 * kMiB);
    // Two woken (mapping + handle each, their host copies freed); nothing else held.
    CHECK(FakeDriver::loaded().live_allocations() == asleep_objects + 2 * 2 - 2);
    CHECK(all_equal(weights[0], 2 * kMiB, 0x100u));
    CHECK(all_equal(weights[1], 2 * kMiB, 0x101u));
    CHECK(cudyn_test::touch_in_child(weights[2], false) == SIGSEGV);

    // The mapping's access failing: the new memory goes again, still asleep.
    {
        const ScopedFault fault("cuMemSetAccess");
        require_refused(cudyn_torch_wake_up(nullptr, 0, nullptr), static_cast<int>(ErrorCode::OutOfMemory) + 1,
                        "0 allocation(s) woke with their bytes, 2 still asleep");
    }
    CHECK(FakeDriver::loaded().live_allocations() == asleep_objects + 2 * 2 - 2);

    cudyn_torch_report report{};
    REQUIRE(cudyn_torch_wake_up(nullptr, 0, &report) == 0);
    CHECK(report.allocations == 2);
    for (std::uint32_t i = 0; i < 4; ++i) CHECK(all_equal(weights[i], 2 * kMiB, 0x100u + i));
    for (CUdeviceptr w : weights) release(w, 2 * kMiB);
    CHECK(before.live_delta() == 0);
}

TEST_CASE("sleep-alloc: a free the driver refuses keeps the allocation, and a retry frees it",
          "[emulated][sleep-alloc]") {
    const Session session;
    const DriverSnapshot& before = session.before;
    const CUdeviceptr a = alloc(2 * kMiB);
    for (const char* spec : {"cuMemUnmap", "cuMemAddressFree"}) {
        INFO(spec);
        const ScopedFault fault(spec);
        cudyn_torch_free(reinterpret_cast<void*>(a), 2 * kMiB, 0, nullptr);
        CHECK(cudyn_torch_last_error_code() == kOutOfMemory);
        CHECK(std::string(cudyn_torch_last_error()).find("SleepingAllocator::free") != std::string::npos);
        CHECK(stats_by_tag()["default@0"].live_count == 1);
    }
    release(a, 2 * kMiB);
    CHECK(cudyn_torch_last_error_code() == 0);
    CHECK(before.live_delta() == 0);
}

TEST_CASE("sleep-alloc: a failed copy to host during sleep releases nothing", "[emulated][sleep-alloc]") {
    const Session session;
    const DriverSnapshot& before = session.before;
    tag("weights");
    const CUdeviceptr a = alloc(2 * kMiB);
    const CUdeviceptr b = alloc(2 * kMiB);
    fill32(a, 2 * kMiB, 1u);
    fill32(b, 2 * kMiB, 2u);
    const long awake_objects = FakeDriver::loaded().live_allocations();
    for (const char* spec : {"cuMemHostAlloc:2", "cuMemcpyDtoH:2"}) {
        INFO(spec);
        const ScopedFault fault(spec);
        require_refused(sleep_offloading({"weights"}), kOutOfMemory, "nothing was released, every allocation stays awake");
        CHECK(FakeDriver::loaded().live_allocations() == awake_objects);
        CHECK(stats_by_tag()["weights@0"].sleeping_count == 0);
    }
    CHECK(all_equal(a, 2 * kMiB, 1u));
    CHECK(all_equal(b, 2 * kMiB, 2u));
    REQUIRE(sleep_offloading({"weights"}) == 0);
    REQUIRE(cudyn_torch_wake_up(nullptr, 0, nullptr) == 0);
    CHECK(all_equal(b, 2 * kMiB, 2u));
    release(a, 2 * kMiB);
    release(b, 2 * kMiB);
    CHECK(before.live_delta() == 0);
}

TEST_CASE("sleep-alloc: an unmap the driver refuses stops the sleep there; sleeping again goes on",
          "[emulated][sleep-alloc]") {
    const Session session;
    const DriverSnapshot& before = session.before;
    tag("weights");
    std::vector<CUdeviceptr> weights;
    for (std::uint32_t i = 0; i < 3; ++i) weights.push_back(alloc(2 * kMiB));
    for (std::uint32_t i = 0; i < 3; ++i) fill32(weights[i], 2 * kMiB, 0x200u + i);
    {
        const ScopedFault fault("cuMemUnmap:2");
        require_refused(sleep_offloading({"weights"}), kOutOfMemory,
                        "1 allocation(s) went to sleep, 2 stay awake, this one among them");
    }
    auto rows = stats_by_tag();
    CHECK(rows["weights@0"].sleeping_count == 1);
    CHECK(rows["weights@0"].offloaded_bytes == 2 * kMiB);  // only the sleeping one keeps a copy
    CHECK(rows["weights@0"].awake_bytes == 4 * kMiB);
    cudyn_torch_report report{};
    REQUIRE(sleep_offloading({"weights"}, &report) == 0);
    CHECK(report.allocations == 2);
    REQUIRE(cudyn_torch_wake_up(nullptr, 0, &report) == 0);
    CHECK(report.allocations == 3);
    for (std::uint32_t i = 0; i < 3; ++i) CHECK(all_equal(weights[i], 2 * kMiB, 0x200u + i));
    for (CUdeviceptr w : weights) release(w, 2 * kMiB);
    CHECK(before.live_delta() == 0);
}

TEST_CASE("sleep-alloc: sleep waits for work still queued on the memory, so the copy holds it",
          "[emulated][sleep-alloc]") {
    const Session session;
    const DriverSnapshot& before = session.before;
    tag("weights");
    const CUdeviceptr w = alloc(2 * kMiB);
    fill32(w, 2 * kMiB, 1u);
    {
        auto stream = cudyn_test::take(cudyn::Stream::create());  // non-blocking: the legacy stream does not wait for it
        const cudyn::DeviceSpan<std::uint32_t> words(w, 2 * kMiB / 4);
        cudyn_test::require_ok(words.fill(0xFEEDu, stream));  // still queued (the fake delays stream work)
        REQUIRE(sleep_offloading({"weights"}) == 0);
    }
    REQUIRE(cudyn_torch_wake_up(nullptr, 0, nullptr) == 0);
    CHECK(all_equal(w, 2 * kMiB, 0xFEEDu));
    release(w, 2 * kMiB);
    CHECK(before.live_delta() == 0);
}

TEST_CASE("sleep-alloc: the cache keeps freed allocations up to its limit; sleep and trim give them back",
          "[emulated][sleep-alloc]") {
    const Session session({"cuMemCreate"});
    const DriverSnapshot& before = session.before;
    REQUIRE(cudyn_torch_set_cache_limit(5 * kMiB) == 0);
    const CUdeviceptr a = alloc(2 * kMiB);
    const CUdeviceptr b = alloc(2 * kMiB);
    const CUdeviceptr c = alloc(2 * kMiB);
    release(a, 2 * kMiB);
    release(b, 2 * kMiB);
    release(c, 2 * kMiB);  // over the limit: back to the driver
    CHECK(cudyn_torch_cached_bytes() == 4 * kMiB);
    const CUdeviceptr again = alloc(2 * kMiB);  // a cache hit: no cuMemCreate
    CHECK((again == a || again == b));
    CHECK(before.calls_since("cuMemCreate") == 3);
    CHECK(cudyn_torch_cached_bytes() == 2 * kMiB);
    CHECK(alloc(4 * kMiB) != 0);  // another size: a new allocation
    CHECK(before.calls_since("cuMemCreate") == 4);

    cudyn_torch_report report{};
    REQUIRE(sleep_offloading({}, &report) == 0);
    CHECK(report.cache_released == 1);
    CHECK(cudyn_torch_cached_bytes() == 0);
    REQUIRE(cudyn_torch_wake_up(nullptr, 0, nullptr) == 0);

    release(again, 2 * kMiB);
    CHECK(cudyn_torch_cached_bytes() == 2 * kMiB);
    REQUIRE(cudyn_torch_trim_cache() == 0);
    CHECK(cudyn_torch_cached_bytes() == 0);
    release(alloc(2 * kMiB), 2 * kMiB);
    CHECK(cudyn_torch_cached_bytes() == 2 * kMiB);
    REQUIRE(cudyn_torch_set_cache_limit(kMiB) == 0);  // a lower limit trims
    CHECK(cudyn_torch_cached_bytes() == 0);
    REQUIRE(cudyn_torch_reset() == 0);  // the 4 MiB one, still live
    CHECK(before.live_delta() == 0);
}

TEST_CASE("sleep-alloc: peers asked for get access to every allocation, again after a wake",
          "[emulated][sleep-alloc]") {
    const Session session;
    const DriverSnapshot& before = session.before;
    const int peers[] = {1};
    REQUIRE(cudyn_torch_set_peers(0, peers, 1) == 0);
    const CUdeviceptr p = alloc(2 * kMiB);
    auto access_of = [&](int device) {
        CUmemLocation location{};
        location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        location.id = device;
        unsigned long long flags = 0;
        cudyn_test::require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemGetAccess_v10020, &flags, &location, p));
        return flags;
    };
    CHECK(access_of(1) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    REQUIRE(sleep_offloading({}) == 0);
    REQUIRE(cudyn_torch_wake_up(nullptr, 0, nullptr) == 0);
    CHECK(access_of(0) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHECK(access_of(1) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    release(p, 2 * kMiB);
    CHECK(before.live_delta() == 0);
}

TEST_CASE("sleep-alloc: the C++ allocator frees everything it holds when it goes", "[emulated][sleep-alloc]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        cudyn::SleepingAllocator allocator;
        cudyn_test::require_ok(allocator.set_tag("weights"));
        const CUdeviceptr awake = cudyn_test::take(allocator.allocate(3 * kMiB, 0));
        const CUdeviceptr sleeping = cudyn_test::take(allocator.allocate(kMiB, 1));  // device 1: its own slot
        CHECK(awake != sleeping);
        cudyn_test::require_ok(allocator.set_cache_limit(64 * kMiB));
        cudyn_test::require_ok(allocator.free(cudyn_test::take(allocator.allocate(kMiB, 0))));
        CHECK(allocator.cached_bytes() == 2 * kMiB);
        CHECK(cudyn_test::take(allocator.sleep({"weights"})).allocations == 2);
        CHECK(allocator.sleeping_count() == 2);
        cudyn_test::require_error(allocator.free(awake + 4096), ErrorCode::InvalidArgument, "not the start");
        CHECK(allocator.allocation_count() == 2);
    }
    CHECK(before.live_delta() == 0);
}
