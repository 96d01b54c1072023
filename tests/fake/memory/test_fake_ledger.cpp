// The memory ledger on the fake drivers: every kind of owner counts itself in
// and out on its device, peaks and totals, a refused release stays counted,
// a refused allocation never counts, labels on tracked allocations, the
// report at exit (a child process), and the CUDYN_LEDGER=0 switch (a Meson
// test of its own, [ledger-off]).
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"  // take, require_ok

#include "cudyn/core/memory_ledger.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/host_registration.hpp"
#include "cudyn/memory/managed_buffer.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/memory/zero_copy_buffer.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"
#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/vmm/physical_memory.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#if !defined(_WIN32)
#include "support/child_process.hpp"
#endif

using cudyn::LedgerEntry;
using cudyn::MemoryKind;
using namespace cudyn_test;  // activate, take, require_ok, ScopedFault, kMiB

namespace {

LedgerEntry row(MemoryKind kind, int device) { return cudyn::ledger::snapshot().of(kind, device); }

// `make` adds one owner of `kind` holding `bytes` on `device`; the row
// gains exactly that while it lives, and loses it when it goes.
template <typename Make>
void require_counted(MemoryKind kind, int device, std::uint64_t bytes, Make make) {
    INFO("kind " << cudyn::to_string(kind) << " on device " << device);
    const LedgerEntry before = row(kind, device);
    {
        auto owner = make();
        const LedgerEntry during = row(kind, device);
        CHECK(during.live_bytes == before.live_bytes + bytes);
        CHECK(during.live_count == before.live_count + 1);
        CHECK(during.total_allocations == before.total_allocations + 1);
        CHECK(during.peak_bytes >= during.live_bytes);
    }
    const LedgerEntry after = row(kind, device);
    CHECK(after.live_bytes == before.live_bytes);
    CHECK(after.live_count == before.live_count);
    CHECK(after.total_allocations == before.total_allocations + 1);
}

}  // namespace

TEST_CASE("Ledger: every owner of memory counts itself in and out, on its device",
          "[emulated][cuda11][legacy][ledger]") {
    REQUIRE(cudyn::ledger::enabled());
    for (int device : {0, 1}) {
        auto context = activate(device);
        require_counted(MemoryKind::Device, device, 4096,
                        [] { return take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024)); });
        require_counted(MemoryKind::Pinned, device, 400,
                        [] { return take(cudyn::PinnedBuffer<std::uint32_t>::allocate(100)); });
        require_counted(MemoryKind::Mapped, device, 64,
                        [] { return take(cudyn::ZeroCopyBuffer<std::uint64_t>::allocate(8)); });
        require_counted(MemoryKind::Managed, device, 1 << 20,
                        [] { return take(cudyn::ManagedBuffer<unsigned char>::allocate(1 << 20)); });
        std::vector<std::uint32_t> host(256);
        require_counted(MemoryKind::Registered, device, 1024,
                        [&host] { return take(cudyn::HostRegistration::register_span(host)); });
    }
}

TEST_CASE("Ledger: pools and stream-ordered buffers", "[emulated][cuda11][ledger]") {
    auto context = activate(1);
    auto stream = take(cudyn::Stream::create());
    require_counted(MemoryKind::Pool, 1, 0,
                    [] { return take(cudyn::MemoryPool::create(cudyn::PoolProperties::device(1))); });
    require_counted(MemoryKind::StreamOrdered, 1, 4000, [&stream] {
        return take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(1000, stream));
    });
    auto pool = take(cudyn::MemoryPool::create(cudyn::PoolProperties::device(1)));
    require_counted(MemoryKind::StreamOrdered, 1, 8, [&] {
        return take(cudyn::StreamOrderedBuffer<std::uint64_t>::allocate(pool, 1, stream));
    });
    // The device's own pool is not this owner's to destroy: not counted.
    const LedgerEntry pools = row(MemoryKind::Pool, 1);
    {
        auto device_pool = take(cudyn::MemoryPool::default_for(take(cudyn::Device::get(1))));
        CHECK(row(MemoryKind::Pool, 1).live_count == pools.live_count);
    }
    require_ok(stream.synchronize());
}

#if !defined(_WIN32)
TEST_CASE("Ledger: physical memory, mappings and reservations", "[emulated][cuda11][ledger]") {
    auto context = activate(0);
    const std::size_t chunk = 2 * kMiB;
    auto physical = take(cudyn::PhysicalMemory::create(cudyn::AllocationProperties::device(1), chunk));
    CHECK(row(MemoryKind::VmmPhysical, 1).live_bytes >= chunk);
    auto range = take(cudyn::AddressRange::reserve(2 * chunk));
    CHECK(row(MemoryKind::VmmReserved, -1).live_bytes >= 2 * chunk);
    require_counted(MemoryKind::VmmMapped, 1, chunk,
                    [&] { return take(cudyn::MappedRange::map(range, chunk, physical)); });
    const LedgerEntry physical_before = row(MemoryKind::VmmPhysical, 1);
    const LedgerEntry reserved_before = row(MemoryKind::VmmReserved, -1);
    physical = cudyn::PhysicalMemory();
    range = cudyn::AddressRange();
    CHECK(row(MemoryKind::VmmPhysical, 1).live_bytes == physical_before.live_bytes - chunk);
    CHECK(row(MemoryKind::VmmReserved, -1).live_bytes == reserved_before.live_bytes - 2 * chunk);
}
#endif

TEST_CASE("Ledger: peaks, reset_peaks, refused allocations and releases", "[emulated][cuda11][legacy][ledger]") {
    auto context = activate(0);
    const LedgerEntry start = row(MemoryKind::Device, 0);
    {
        auto a = take(cudyn::DeviceBuffer<unsigned char>::allocate(3000));
        auto b = take(cudyn::DeviceBuffer<unsigned char>::allocate(5000));
        CHECK(row(MemoryKind::Device, 0).peak_bytes >= start.live_bytes + 8000);
    }
    cudyn::ledger::reset_peaks();
    CHECK(row(MemoryKind::Device, 0).peak_bytes == start.live_bytes);
    {
        auto c = take(cudyn::DeviceBuffer<unsigned char>::allocate(1000));
        CHECK(row(MemoryKind::Device, 0).peak_bytes == start.live_bytes + 1000);
    }
    // Refused by the driver: never counted.
    {
        const ScopedFault fault("cuMemAlloc_v2:1:CUDA_ERROR_OUT_OF_MEMORY");
        CHECK_FALSE(cudyn::DeviceBuffer<unsigned char>::allocate(64).has_value());
    }
    CHECK(row(MemoryKind::Device, 0).live_count == start.live_count);
    CHECK(row(MemoryKind::Device, 0).total_allocations == start.total_allocations + 3);
    // A refused free keeps it counted (the driver still holds it); a retry counts it out.
    auto d = take(cudyn::DeviceBuffer<unsigned char>::allocate(128));
    {
        const ScopedFault fault("cuMemFree_v2:1:CUDA_ERROR_INVALID_VALUE");
        CHECK_FALSE(d.free().has_value());
    }
    CHECK(row(MemoryKind::Device, 0).live_bytes == start.live_bytes + 128);
    require_ok(d.free());
    CHECK(row(MemoryKind::Device, 0).live_bytes == start.live_bytes);
    // Moving an owner moves its entry: counted once.
    auto e = take(cudyn::DeviceBuffer<unsigned char>::allocate(256));
    auto f = std::move(e);
    CHECK(row(MemoryKind::Device, 0).live_count == start.live_count + 1);
}

TEST_CASE("Ledger: tracked allocations carry the label in force", "[emulated][cuda11][legacy][ledger]") {
    auto context = activate(0);
    cudyn::ledger::track_allocations(true);
    REQUIRE(cudyn::ledger::tracking_allocations());
    auto unlabelled = take(cudyn::PinnedBuffer<unsigned char>::allocate(10));
    std::vector<cudyn::DeviceBuffer<unsigned char>> labelled;
    {
        const cudyn::LedgerLabel outer("weights");
        labelled.push_back(take(cudyn::DeviceBuffer<unsigned char>::allocate(20)));
        {
            const cudyn::LedgerLabel inner("a label longer than thirty-one characters is cut");
            labelled.push_back(take(cudyn::DeviceBuffer<unsigned char>::allocate(30)));
        }
        labelled.push_back(take(cudyn::DeviceBuffer<unsigned char>::allocate(40)));
    }
    const auto alive = cudyn::ledger::live_allocations();
    REQUIRE(alive.size() == 4);
    CHECK(alive[0].kind == MemoryKind::Pinned);
    CHECK(alive[0].label.empty());
    CHECK(alive[0].bytes == 10);
    CHECK(alive[0].address == reinterpret_cast<std::uintptr_t>(unlabelled.data()));
    CHECK(alive[1].label == "weights");
    CHECK(alive[1].device == 0);
    CHECK(alive[1].address == labelled[0].device_address());
    CHECK(alive[2].label == "a label longer than thirty-one ");
    CHECK(alive[3].label == "weights");
    labelled.clear();
    CHECK(cudyn::ledger::live_allocations().size() == 1);
    cudyn::ledger::track_allocations(false);
    auto untracked = take(cudyn::DeviceBuffer<unsigned char>::allocate(50));
    CHECK(cudyn::ledger::live_allocations().size() == 1);
    const std::string text = cudyn::ledger::format(cudyn::ledger::snapshot());
    CHECK(text.find("device               dev  0  live ") != std::string::npos);
    CHECK(text.find("pinned") != std::string::npos);
}

// The stream-ordered allocation opens its entry in place and, when not
// tracking, closes it on a path of its own: with tracking on, the entry must
// still be listed with its label and leave the list with the free, and the
// counts must come back.
TEST_CASE("Ledger: a tracked stream-ordered allocation on a created stream is listed and unlisted",
          "[emulated][cuda11][ledger]") {
    auto context = activate(0);
    auto stream = take(cudyn::Stream::create());
    auto pool = take(cudyn::MemoryPool::create(cudyn::PoolProperties::device(0)));
    const LedgerEntry before = row(MemoryKind::StreamOrdered, 0);
    cudyn::ledger::track_allocations(true);
    const std::size_t listed = cudyn::ledger::live_allocations().size();
    {
        const cudyn::LedgerLabel label("activations");
        auto buffer = take(cudyn::StreamOrderedBuffer<std::uint16_t>::allocate(pool, 3000, stream));
        const auto alive = cudyn::ledger::live_allocations();
        REQUIRE(alive.size() == listed + 1);
        CHECK(alive.back().kind == MemoryKind::StreamOrdered);
        CHECK(alive.back().device == 0);
        CHECK(alive.back().bytes == 6000);
        CHECK(alive.back().address == buffer.device_address());
        CHECK(alive.back().label == "activations");
        CHECK(row(MemoryKind::StreamOrdered, 0).live_bytes == before.live_bytes + 6000);
        require_ok(buffer.free());
        CHECK(cudyn::ledger::live_allocations().size() == listed);
    }
    cudyn::ledger::track_allocations(false);
    // Untracked again: counted in and out without a record.
    {
        auto buffer = take(cudyn::StreamOrderedBuffer<std::uint16_t>::allocate(pool, 10, stream));
        CHECK(cudyn::ledger::live_allocations().size() == listed);
        CHECK(row(MemoryKind::StreamOrdered, 0).live_count == before.live_count + 1);
    }
    const LedgerEntry after = row(MemoryKind::StreamOrdered, 0);
    CHECK(after.live_bytes == before.live_bytes);
    CHECK(after.live_count == before.live_count);
    CHECK(after.total_allocations == before.total_allocations + 2);
    CHECK(after.peak_bytes >= before.live_bytes + 6000);
    require_ok(stream.synchronize());
}

TEST_CASE("Ledger: CUDYN_LEDGER=0 counts nothing", "[emulated][ledger-off]") {
    auto context = activate(0);
    CHECK_FALSE(cudyn::ledger::enabled());
    auto buffer = take(cudyn::DeviceBuffer<unsigned char>::allocate(100));
    cudyn::ledger::track_allocations(true);
    auto pinned = take(cudyn::PinnedBuffer<unsigned char>::allocate(100));
    const cudyn::LedgerSnapshot snapshot = cudyn::ledger::snapshot();
    CHECK_FALSE(snapshot.enabled);
    CHECK(snapshot.entries.empty());
    CHECK(cudyn::ledger::live_allocations().empty());
    CHECK(cudyn::ledger::format(snapshot) == "ledger off\n");
}

#if !defined(_WIN32)
// The buffer the child below leaves alive at exit, held by a global of
// external linkage: a leak checker (the sanitizer build) finds it reachable,
// not lost, and the compiler cannot drop the store.
cudyn::DeviceBuffer<unsigned char>* ledger_left_behind = nullptr;

namespace {

// Writes its stderr to the file named by its argument, then lets a labelled
// device buffer outlive main: CUDYN_LEDGER_REPORT=1 must name it at exit.
int leaking_role(int argc, char** argv) {
    if (argc < 1 || std::freopen(argv[0], "w", stderr) == nullptr) return 2;
    auto device = cudyn::Device::get(0);
    if (!device) return 3;
    static auto context = cudyn::PrimaryContext::activate(*device);
    if (!context) return 4;
    const cudyn::LedgerLabel label("left-behind");
    auto buffer = cudyn::DeviceBuffer<unsigned char>::allocate(4096);
    if (!buffer) return 5;
    ledger_left_behind = new cudyn::DeviceBuffer<unsigned char>(std::move(*buffer));  // never freed, on purpose
    return 0;
}
const cudyn_test::ChildRole leaking("ledger-leaking", leaking_role);

}  // namespace

TEST_CASE("Ledger: CUDYN_LEDGER_REPORT=1 names what is alive at exit", "[emulated][ledger]") {
    const std::string path = "ledger-report-" + std::to_string(static_cast<long>(::getpid())) + ".txt";
    REQUIRE(::setenv("CUDYN_LEDGER_REPORT", "1", 1) == 0);
    auto child = cudyn_test::ChildProcess::spawn("ledger-leaking", {path});
    REQUIRE(::unsetenv("CUDYN_LEDGER_REPORT") == 0);
    CHECK(child.wait(std::chrono::seconds(30)) == 0);
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    std::remove(path.c_str());
    INFO(text.str());
    CHECK(text.str().find("cudyn ledger: 1 allocation(s) still alive at exit") != std::string::npos);
    CHECK(text.str().find("left-behind") != std::string::npos);
    CHECK(text.str().find("4096 B") != std::string::npos);
}
#endif
