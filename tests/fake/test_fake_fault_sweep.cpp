// The fault sweep ([fault-sweep], emulated fake): every public operation that
// makes more than one driver call, with each of its calls failed in turn.
//
// A row is one operation: it builds the state the operation works on, runs
// the operation inside `trial.operation(...)`, and checks what must hold
// afterwards, which depends on whether a call was failed (trial.injected()):
// the object that existed before is unchanged and usable (its size, address,
// bytes; a retry succeeds), or names what stayed applied. The sweep runs each
// row once to warm the library's caches, once recording the calls the
// operation makes (fakecuda_record_calls), then once per recorded call with
// that call failed (FAKECUDA_FAIL "name:N"), and checks after each run that
// allocations, bytes in use, streams, events, descriptors, context retains,
// stream work and the memory ledger's live rows are back at their baseline. A
// row whose operation makes no driver call fails (the recording broke). A new
// operation is one more row.
//
// The sweep's PrimaryContext lives throughout, as a program's does: owners
// share its retain of the context, so no row takes the first retain or gives
// back the last (giving back the last one is a destructor's business: a
// failure there is dropped, not reported).
#include "support/catch.hpp"
#include "support/checkpoint_target.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/ipc_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/memory/copy_plan.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/share/dma_buf.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/vmm/growable_buffer.hpp"
#include "cudyn/memory/host_registration.hpp"
#include "cudyn/share/ipc_event.hpp"
#include "cudyn/share/ipc_memory.hpp"
#include "cudyn/memory/zero_copy_buffer.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/memory/migration_policy.hpp"
#include "cudyn/share/imported_ipc_memory.hpp"
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/share/pool_sharing.hpp"
#include "cudyn/memory/prefetch_plan.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"
#include "cudyn/share/allocation_sharing.hpp"
#include "cudyn/share/descriptor_transfer.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"
#include "cudyn/memory/managed_buffer.hpp"
#include "cudyn/device/stream_memory_ops.hpp"
#include "cudyn/vmm/range_access.hpp"
#include "cudyn/device/event.hpp"
#include "cudyn/device/peer_access.hpp"
#include "cudyn/memory/peer_copy.hpp"
#include "cudyn/share/range_sharing.hpp"
#include "cudyn/memory/copy_3d.hpp"
#include "cudyn/memory/pitched_buffer.hpp"
#include "cudyn/memory/memory_info.hpp"
#include "cudyn/core/memory_ledger.hpp"
#include "cudyn/checkpoint/checkpoint_preparation.hpp"
#include "cudyn/checkpoint/process_checkpoint.hpp"

#include "core/wire_format.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

using cudyn::AccessFlags;
using cudyn::AllocationProperties;
using cudyn::ErrorCode;
using cudyn::GrowableBuffer;
using cudyn::HandleType;
using cudyn::IpcMemoryDescriptor;
using cudyn::Location;
using namespace cudyn_test;  // FakeDriver, activate, take, require_ok, kMiB, ipc helpers below
using namespace cudyn_test::ipc;

namespace {

constexpr std::size_t kChunk = 2 * kMiB;
constexpr std::uint32_t kStamp = 0x5EEDF00Du;

// One run of a row: plain (warm-up), recording its calls, or with one failed.
class Trial {
public:
    enum class Mode { Plain, Record, Inject };
    Trial(Mode mode, std::string fault) : mode_(mode), fault_(std::move(fault)) {}

    // Runs the operation under test. Plain and recording runs must succeed;
    // an injected run must fail, with the error coming back. What it made
    // (an owner, a descriptor) goes when this returns, after the recording.
    template <typename Operation>
    void operation(Operation run) {
        const FakeDriver& fake = FakeDriver::loaded();
        if (mode_ == Mode::Record) fake.record_calls(true);
        if (mode_ == Mode::Inject) fake.set_fail(fault_.c_str());
        auto result = run();
        if (mode_ == Mode::Inject) fake.set_fail("");
        if (mode_ == Mode::Record) {
            fake.record_calls(false);
            calls_ = fake.recorded_calls();
        }
        ran_ = true;
        failed_ = !result.has_value();
        if (failed_) error_ = result.error().describe();
        INFO((failed_ ? error_ : std::string("it succeeded")));
        if (mode_ == Mode::Inject)
            CHECK(failed_);
        else
            REQUIRE_FALSE(failed_);
    }

    bool injected() const noexcept { return mode_ == Mode::Inject; }
    // The injected point ("cuMemMap:2"), empty outside an injected run.
    const std::string& fault() const noexcept { return fault_; }
    const std::string& error() const noexcept { return error_; }
    bool ran() const noexcept { return ran_; }
    const std::vector<std::string>& calls() const noexcept { return calls_; }

private:
    Mode mode_;
    std::string fault_;
    bool ran_ = false;
    bool failed_ = false;
    std::string error_;
    std::vector<std::string> calls_;
};

struct Row {
    const char* name;
    std::function<void(Trial&)> body;
};

// What must be back where it was after every run of a row.
struct Baseline {
    long live = 0;
    unsigned long long bytes = 0;
    long streams = 0;
    long events = 0;
    long descriptors = 0;
    int retains = 0;
    long pools = 0;
    std::string ledger;  // the memory ledger's live bytes and counts, row by row

    static Baseline now() {
        const FakeDriver& fake = FakeDriver::loaded();
        const auto live_pools = probe<PFN_fakecuda_live_pools>("fakecuda_live_pools");
        return Baseline{fake.live_allocations(), device_bytes(),      fake.live_streams(),
                        fake.live_events(),      open_descriptors(), fake.primary_ctx_refcount(0),
                        live_pools ? live_pools() : 0,  ledger_live()};
    }
    static std::string ledger_live() {
        std::string rows;
        for (const cudyn::LedgerEntry& entry : cudyn::ledger::snapshot().entries) {
            rows += std::string(cudyn::to_string(entry.kind)) + " dev " + std::to_string(entry.device) + ": " +
                    std::to_string(entry.live_bytes) + " B in " + std::to_string(entry.live_count) + "\n";
        }
        return rows;
    }
    static unsigned long long device_bytes() {
        auto bytes = probe<PFN_fakecuda_device_bytes_in_use>("fakecuda_device_bytes_in_use");
        return bytes ? bytes(0) : 0;
    }
};

void require_same(const Baseline& before, const Baseline& after) {
    CHECK(after.live == before.live);
    CHECK(after.bytes == before.bytes);
    CHECK(after.streams == before.streams);
    CHECK(after.events == before.events);
    CHECK(after.descriptors == before.descriptors);
    CHECK(after.retains == before.retains);
    CHECK(after.pools == before.pools);
    CHECK(after.ledger == before.ledger);
    CHECK(FakeDriver::loaded().pending_work() == 0);
    CHECK(FakeDriver::loaded().context_error(0) == 0);
}

// "cuMemMap:2" for the second cuMemMap of a recorded sequence, one per call.
std::vector<std::string> injection_points(const std::vector<std::string>& calls) {
    std::map<std::string, int> seen;
    std::vector<std::string> points;
    for (const std::string& call : calls) points.push_back(call + ":" + std::to_string(++seen[call]));
    return points;
}

GrowableBuffer growable(std::size_t chunks) {
    auto buffer = take(GrowableBuffer::create(AllocationProperties::device(0), 8 * kChunk));
    require_ok(buffer.grow_to(chunks * kChunk));
    if (chunks != 0) require_ok(take(buffer.device_span_as<std::uint32_t>()).fill(kStamp));
    return buffer;
}

// The rows. Each builds its state, runs its operation, and checks.
std::vector<Row> rows(const IpcMemoryDescriptor& peer_memory, const cudyn::IpcEventDescriptor& peer_event) {
    const auto device0 = AllocationProperties::device(0);
    const auto fd_shareable = device0.with_handle_types(HandleType::PosixFileDescriptor);
    const auto fabric_shareable = device0.with_handle_types(HandleType::Fabric);
    return {
        {"DeviceBuffer::allocate", [](Trial& t) { t.operation([] { return cudyn::DeviceBuffer<int>::allocate(64); }); }},
        {"PinnedBuffer::allocate", [](Trial& t) { t.operation([] { return cudyn::PinnedBuffer<int>::allocate(64); }); }},
        {"ZeroCopyBuffer::allocate", [](Trial& t) { t.operation([] { return cudyn::ZeroCopyBuffer<int>::allocate(64); }); }},
        {"ManagedBuffer::allocate", [](Trial& t) { t.operation([] { return cudyn::ManagedBuffer<int>::allocate(64); }); }},
        {"HostRegistration::register_memory (device_mapped)",
         [](Trial& t) {
             std::vector<std::uint32_t> host(1024);
             cudyn::HostRegisterFlags flags;
             flags.device_mapped = true;
             t.operation([&] { return cudyn::HostRegistration::register_memory(host.data(), 4096, flags); });
         }},
        {"DeviceBuffer::free",
         [](Trial& t) {
             auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(64));
             const CUdeviceptr address = buffer.device_address();
             t.operation([&] { return buffer.free(); });
             if (t.injected()) {  // still the owner: a retry frees it
                 CHECK(buffer.device_address() == address);
                 require_ok(buffer.free());
             }
         }},
        {"DeviceSpan::fill (synchronous)",
         [](Trial& t) {
             auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
             require_ok(buffer.fill(1u));
             t.operation([&] { return buffer.device_span().fill(2u); });
             require_ok(buffer.fill(3u));  // usable
             CHECK(read_device(buffer.device_address(), 1024) == std::vector<std::uint32_t>(1024, 3u));
         }},
        {"DeviceSpan::copy_from(host) (synchronous)",
         [](Trial& t) {
             auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
             const std::vector<std::uint32_t> values = iota_vector(1024, 7);
             t.operation([&] { return buffer.device_span().copy_from(values); });
             require_ok(buffer.copy_from(values));
             CHECK(read_device(buffer.device_address(), 1024) == values);
         }},
        {"Stream::create", [](Trial& t) { t.operation([] { return cudyn::Stream::create(); }); }},
        {"IpcEvent::create", [](Trial& t) { t.operation([] { return cudyn::IpcEvent::create(); }); }},
        {"PhysicalMemory::create", [device0](Trial& t) { t.operation([&] { return cudyn::PhysicalMemory::create(device0, kChunk); }); }},
        {"MappedRange::map (with access)",
         [device0](Trial& t) {
             auto range = take(cudyn::AddressRange::reserve(2 * kChunk));
             auto memory = take(cudyn::PhysicalMemory::create(device0, kChunk));
             t.operation([&] {
                 return cudyn::MappedRange::map(range, 0, memory, {{Location::device(0), AccessFlags::ReadWrite}});
             });
             CHECK(range.mapping_count() == 0);  // the mapping went with the Result
             auto again = take(cudyn::MappedRange::map(range, 0, memory, {{Location::device(0), AccessFlags::ReadWrite}}));
             fill32(again.device_address(), kChunk, kStamp);
         }},
        {"MappedRange::unmap",
         [device0](Trial& t) {
             auto range = take(cudyn::AddressRange::reserve(2 * kChunk));
             auto memory = take(cudyn::PhysicalMemory::create(device0, kChunk));
             auto mapping = take(cudyn::MappedRange::map(range, 0, memory, {{Location::device(0), AccessFlags::ReadWrite}}));
             fill32(mapping.device_address(), kChunk, kStamp);
             t.operation([&] { return mapping.unmap(); });
             if (t.injected() && !mapping.empty()) {  // refused: still mapped, bytes intact, a retry works
                 CHECK(all_equal(mapping.device_address(), kChunk, kStamp));
                 require_ok(mapping.unmap());
             }
             CHECK(range.mapping_count() == 0);
         }},
        {"set_range_access (two chunks, a peer device granted)",
         [device0](Trial& t) {
             auto range = take(cudyn::AddressRange::reserve(2 * kChunk));
             auto first = take(cudyn::PhysicalMemory::create(device0, kChunk));
             auto second = take(cudyn::PhysicalMemory::create(device0, kChunk));
             auto a = take(cudyn::MappedRange::map(range, 0, first, {{Location::device(0), AccessFlags::ReadWrite}}));
             auto b = take(cudyn::MappedRange::map(range, kChunk, second, {{Location::device(0), AccessFlags::ReadWrite}}));
             t.operation([&] { return cudyn::set_range_access(range, {{Location::device(1), AccessFlags::Read}}); });
             // One cuMemSetAccess: refused, nothing was granted; else both chunks were.
             const AccessFlags expected = t.injected() ? AccessFlags::None : AccessFlags::Read;
             CHECK(take(a.access(Location::device(1))) == expected);
             CHECK(take(b.access(Location::device(1))) == expected);
         }},
        {"range_span_as (one access query per mapping)",
         [device0](Trial& t) {
             auto range = take(cudyn::AddressRange::reserve(2 * kChunk));
             auto first = take(cudyn::PhysicalMemory::create(device0, kChunk));
             auto second = take(cudyn::PhysicalMemory::create(device0, kChunk));
             auto a = take(cudyn::MappedRange::map(range, 0, first, {{Location::device(0), AccessFlags::ReadWrite}}));
             auto b = take(cudyn::MappedRange::map(range, kChunk, second, {{Location::device(0), AccessFlags::ReadWrite}}));
             t.operation([&] { return cudyn::range_span_as<std::uint32_t>(range, Location::device(0)); });
             CHECK(take(cudyn::range_access(range, Location::device(0))) == AccessFlags::ReadWrite);
         }},
        {"wait_value64 (the device's 64-bit gate, then the wait)",
         [](Trial& t) {
             auto word = take(cudyn::DeviceBuffer<std::uint64_t>::allocate(1));
             require_ok(word.set_bytes(0));
             auto stream = take(cudyn::Stream::create());
             // A raw handle: the device is asked of the current context.
             t.operation([&] { return cudyn::wait_value64(word.device_address(), 0, cudyn::WaitCondition::Equal, stream.handle()); });
             require_ok(stream.synchronize());  // met at once: nothing holds the stream
         }},
        {"StreamMemoryBatch::execute (64-bit: the gate, then one call)",
         [](Trial& t) {
             auto word = take(cudyn::DeviceBuffer<std::uint64_t>::allocate(1));
             require_ok(word.set_bytes(0));
             auto stream = take(cudyn::Stream::create());
             cudyn::StreamMemoryBatch batch;
             require_ok(batch.write_value64(word.device_address(), 7));
             t.operation([&] { return batch.execute(stream.handle()); });
             require_ok(stream.synchronize());
             std::uint64_t value = 0;
             require_ok(word.copy_to(cudyn::HostSpan<std::uint64_t>(&value, 1)));
             CHECK(value == (t.injected() ? 0u : 7u));  // refused whole, or done
         }},
        {"GrowableBuffer::create", [device0](Trial& t) { t.operation([&] { return GrowableBuffer::create(device0, 8 * kChunk); }); }},
        {"GrowableBuffer::grow_to",
         [](Trial& t) {
             auto buffer = growable(1);
             t.operation([&] { return buffer.grow_to(3 * kChunk); });
             if (t.injected()) {  // rolled back to one chunk, bytes kept; growing again works
                 CHECK(buffer.size_bytes() == kChunk);
                 CHECK(all_equal(buffer.device_address(), kChunk, kStamp));
                 require_ok(buffer.grow_to(3 * kChunk));
             }
             CHECK(buffer.size_bytes() == 3 * kChunk);
         }},
        {"GrowableBuffer::shrink_to",
         [](Trial& t) {
             auto buffer = growable(3);
             t.operation([&] { return buffer.shrink_to(kChunk); });
             // Refused part-way: the chunks still mapped are whole and readable; a retry finishes.
             CHECK(all_equal(buffer.device_address(), buffer.size_bytes(), kStamp));
             require_ok(buffer.shrink_to(kChunk));
             CHECK(buffer.size_bytes() == kChunk);
             CHECK(all_equal(buffer.device_address(), kChunk, kStamp));
         }},
        {"GrowableBuffer::release_physical(Save)",
         [](Trial& t) {
             auto buffer = growable(3);
             t.operation([&] { return buffer.release_physical(GrowableBuffer::Contents::Save); });
             if (t.injected() && buffer.released()) require_ok(buffer.release_physical(GrowableBuffer::Contents::Save));
             require_ok(buffer.restore());  // from wherever it stopped, the bytes come back
             CHECK(buffer.size_bytes() == 3 * kChunk);
             CHECK(all_equal(buffer.device_address(), 3 * kChunk, kStamp));
         }},
        {"GrowableBuffer::restore",
         [](Trial& t) {
             auto buffer = growable(3);
             require_ok(buffer.release_physical(GrowableBuffer::Contents::Save));
             t.operation([&] { return buffer.restore(); });
             if (t.injected()) {  // still released with the bytes saved: a retry restores them
                 CHECK(buffer.released());
                 CHECK(buffer.holds_saved_contents());
                 require_ok(buffer.restore());
             }
             CHECK(all_equal(buffer.device_address(), 3 * kChunk, kStamp));
         }},
        {"PhysicalMemory::create (host NUMA)",
         [](Trial& t) { t.operation([] { return cudyn::PhysicalMemory::create(AllocationProperties::host_numa(0), kChunk); }); }},
        {"GrowableBuffer::grow_to (host NUMA, host-readable)",
         [](Trial& t) {
             auto buffer = take(GrowableBuffer::create(AllocationProperties::host_numa(0), 8 * kChunk));
             require_ok(buffer.grow_to(kChunk));
             REQUIRE(buffer.host_address() != nullptr);
             static_cast<std::uint32_t*>(buffer.host_address())[0] = kStamp;
             t.operation([&] { return buffer.grow_to(3 * kChunk); });
             if (t.injected()) {  // rolled back to one chunk, the host's bytes kept; growing again works
                 CHECK(buffer.size_bytes() == kChunk);
                 require_ok(buffer.grow_to(3 * kChunk));
             }
             REQUIRE(buffer.host_address() != nullptr);
             CHECK(static_cast<std::uint32_t*>(buffer.host_address())[0] == kStamp);
             static_cast<std::uint32_t*>(buffer.host_address())[3 * kChunk / 4 - 1] = kStamp;  // the new chunks too
         }},
        {"MigrationPolicy::apply_to",
         [](Trial& t) {
             auto managed = take(cudyn::ManagedBuffer<std::uint32_t>::allocate(1024));
             auto range = take(managed.managed_range());
             t.operation([&] { return cudyn::MigrationPolicy::prefer_device(0).apply_to(range); });
             if (t.injected())
                 CHECK((t.error().find("nothing was applied") != std::string::npos ||
                        t.error().find("still in effect") != std::string::npos));
             require_ok(cudyn::MigrationPolicy::prefer_device(0).apply_to(range));
         }},
        {"PrefetchPlan::execute (synchronous)",
         [](Trial& t) {
             auto managed = take(cudyn::ManagedBuffer<std::uint32_t>::allocate(2048));
             cudyn::PrefetchPlan plan;
             require_ok(plan.add(take(managed.managed_range(0, 1024)), Location::device(0)));
             require_ok(plan.add(take(managed.managed_range(1024, 1024)), Location::host()));
             t.operation([&] { return plan.execute(); });
             if (t.injected())
                 CHECK((t.error().find(" issued") != std::string::npos ||
                        t.error().find("cuStreamSynchronize") != std::string::npos));
             require_ok(plan.execute());
         }},
        {"CopyPlan::execute (synchronous: one copy call per range)",
         [](Trial& t) {
             auto source = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(2048));
             require_ok(source.copy_from(iota_vector(2048, 11)));
             auto destination = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
             std::vector<std::uint32_t> host(1024);
             cudyn::CopyPlan plan;
             require_ok(plan.add(destination.device_span(), take(source.device_span().subspan(0, 1024))));
             require_ok(plan.add(host, take(source.device_span().subspan(1024, 1024))));
             t.operation([&] { return plan.execute(); });
             if (t.injected())  // what was issued is named, or the wait that failed
                 CHECK((t.error().find(" issued") != std::string::npos ||
                        t.error().find("cuStreamSynchronize") != std::string::npos));
             (void)take(plan.execute());  // a retry does all of it
             CHECK(read_device(destination.device_address(), 1024) == iota_vector(1024, 11));
             CHECK(host == iota_vector(1024, 11 + 1024));
         }},
        {"CopyPlan::execute(stream) (one batch call)",
         [](Trial& t) {
             auto stream = take(cudyn::Stream::create());
             auto source = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(2048));
             require_ok(source.copy_from(iota_vector(2048, 5)));
             auto destination = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(2048));
             require_ok(destination.fill(0u));
             cudyn::CopyPlan plan;
             for (std::size_t half = 0; half < 2; ++half)
                 require_ok(plan.add(take(destination.device_span().subspan(half * 1024, 1024)),
                                     take(source.device_span().subspan(half * 1024, 1024))));
             t.operation([&] { return plan.execute(stream); });
             require_ok(stream.synchronize());
             if (t.injected()) {  // one call: refused, nothing of it ran; a retry does all of it
                 // The other injection point is the stream-context check before the batch.
                 if (t.fault().rfind("cuCtxGetCurrent", 0) == 0)
                     CHECK(t.error().find("cuCtxGetCurrent") != std::string::npos);
                 else
                     CHECK(t.error().find("one call for the batch of 2 copies") != std::string::npos);
                 CHECK(read_device(destination.device_address(), 2048) == std::vector<std::uint32_t>(2048, 0u));
                 (void)take(plan.execute(stream));
                 require_ok(stream.synchronize());
             }
             CHECK(read_device(destination.device_address(), 2048) == iota_vector(2048, 5));
         }},
        {"export_ipc_event",
         [](Trial& t) {
             auto event = take(cudyn::IpcEvent::create());
             t.operation([&] { return export_ipc_event(event); });
             require_ok(event.record(cudyn::Stream::legacy_default()));
         }},
        {"export_memory_fd",
         [fd_shareable](Trial& t) {
             auto memory = take(cudyn::PhysicalMemory::create(fd_shareable, kChunk));
             t.operation([&] { return cudyn::export_memory_fd(memory); });
         }},
        {"import_memory_fd",
         [fd_shareable](Trial& t) {
             auto memory = take(cudyn::PhysicalMemory::create(fd_shareable, kChunk));
             auto exported = take(cudyn::export_memory_fd(memory));
             t.operation([&] { return cudyn::import_memory_fd(std::move(exported)); });
         }},
        {"export_memory_fabric",
         [fabric_shareable](Trial& t) {
             const ScopedImexChannel imex;  // modelled: no machine measured had one
             auto memory = take(cudyn::PhysicalMemory::create(fabric_shareable, kChunk));
             t.operation([&] { return cudyn::export_memory_fabric(memory); });
         }},
        {"import_memory_fabric",
         [fabric_shareable](Trial& t) {
             const ScopedImexChannel imex;  // modelled: no machine measured had one
             auto memory = take(cudyn::PhysicalMemory::create(fabric_shareable, kChunk));
             auto descriptor = take(cudyn::export_memory_fabric(memory));
             t.operation([&] { return cudyn::import_memory_fabric(descriptor); });
         }},
        {"export_dma_buf",
         [](Trial& t) {
             auto buffer = take(cudyn::DeviceBuffer<std::byte>::allocate(kChunk));
             t.operation([&] { return cudyn::export_dma_buf(buffer); });
             CHECK(take(cudyn::export_dma_buf(buffer)).valid());  // nothing left claimed: a retry works
         }},
        {"probe_fabric_support",
         [](Trial& t) {
             const ScopedImexChannel imex;  // modelled: every step of the trial export
             const auto device = take(cudyn::Device::get(0));
             t.operation([&] { return cudyn::probe_fabric_support(device); });
         }},
        {"MemoryPool::create (shareable)",
         [](Trial& t) {
             t.operation([] {
                 return cudyn::MemoryPool::create(
                     cudyn::PoolProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor));
             });
         }},
        {"StreamOrderedBuffer::copy_from(host) (synchronous)",
         [](Trial& t) {
             auto pool = take(cudyn::MemoryPool::create(cudyn::PoolProperties::device(0)));
             auto stream = take(cudyn::Stream::create());
             auto buffer = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, 1024, stream));
             const std::vector<std::uint32_t> values = iota_vector(1024, 3);
             t.operation([&] { return buffer.copy_from(values); });
             require_ok(buffer.copy_from(values));  // usable, and the bytes arrive
             CHECK(read_device(buffer.device_address(), 1024) == values);
             require_ok(buffer.free());
             require_ok(stream.synchronize());
         }},
        {"MemoryPool::usage",
         [](Trial& t) {
             auto pool = take(cudyn::MemoryPool::create(cudyn::PoolProperties::device(0)));
             t.operation([&] { return pool.usage(); });
             CHECK(take(pool.usage()).used_bytes == 0);
         }},
        {"MemoryPool::reset_high_water_marks",
         [](Trial& t) {
             auto pool = take(cudyn::MemoryPool::create(cudyn::PoolProperties::device(0)));
             t.operation([&] { return pool.reset_high_water_marks(); });
             require_ok(pool.reset_high_water_marks());
         }},
        {"MemoryPool::set_access (a peer)",
         [](Trial& t) {
             auto pool = take(cudyn::MemoryPool::create(cudyn::PoolProperties::device(0)));
             t.operation([&] { return pool.set_access({Location::device(1), AccessFlags::ReadWrite}); });
             if (t.injected()) CHECK(take(pool.access(Location::device(1))) == AccessFlags::None);  // unchanged
             require_ok(pool.set_access({Location::device(1), AccessFlags::ReadWrite}));
         }},
        {"enable_peer_access",
         [](Trial& t) {
             auto context0 = take(cudyn::PrimaryContext::retain(take(cudyn::Device::get(0))));
             auto context1 = take(cudyn::PrimaryContext::retain(take(cudyn::Device::get(1))));
             require_ok(cudyn::disable_peer_access(context0, context1));  // each run starts without access
             t.operation([&] { return cudyn::enable_peer_access(context0, context1); });
             // The caller's context is back, failed or not; a retry enables.
             CUcontext current = nullptr;
             require_ok(cudyn::call_driver(&cudyn::DriverTable::cuCtxGetCurrent_v4000, &current));
             CHECK(current == context0.handle());
             require_ok(cudyn::enable_peer_access(context0, context1));
             require_ok(cudyn::disable_peer_access(context0, context1));
         }},
        {"copy_peer (synchronous, device 1 to device 0)",
         [](Trial& t) {
             auto context0 = take(cudyn::PrimaryContext::retain(take(cudyn::Device::get(0))));
             auto context1 = take(cudyn::PrimaryContext::retain(take(cudyn::Device::get(1))));
             auto destination = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
             require_ok(context1.make_current());
             auto source = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
             require_ok(source.fill(kStamp));
             require_ok(context0.make_current());
             t.operation([&] { return cudyn::copy_peer(destination.device_span(), context0, source.device_span(), context1); });
             require_ok(cudyn::copy_peer(destination.device_span(), context0, source.device_span(), context1));
             CHECK(read_device(destination.device_address(), 1024) == std::vector<std::uint32_t>(1024, kStamp));
         }},
        {"Event::record (an owned stream)",
         [](Trial& t) {
             auto stream = take(cudyn::Stream::create());
             auto event = take(cudyn::Event::create());
             t.operation([&] { return event.record(stream); });
             require_ok(event.record(stream));
             require_ok(event.synchronize());
         }},
        {"export_pool_pointer",
         [](Trial& t) {
             auto pool = take(cudyn::MemoryPool::create(
                 cudyn::PoolProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor)));
             auto stream = take(cudyn::Stream::create());
             auto buffer = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, 1024, stream));
             (void)take(cudyn::export_pool_fd(pool));  // the pool first, as the driver requires
             t.operation([&] { return cudyn::export_pool_pointer(pool, buffer); });
             (void)take(cudyn::export_pool_pointer(pool, buffer));
             require_ok(buffer.free());
             require_ok(stream.synchronize());
         }},
        {"ImportedIpcMemory::open (another process's buffer)",
         [&peer_memory](Trial& t) {
             t.operation([&] { return cudyn::import_ipc_memory(peer_memory); });
             auto again = take(cudyn::import_ipc_memory(peer_memory));  // nothing left claimed or mapped
             require_ok(again.close());
         }},
        {"ImportedIpcMemory::close",
         [&peer_memory](Trial& t) {
             auto opened = take(cudyn::import_ipc_memory(peer_memory));
             t.operation([&] { return opened.close(); });
             if (t.injected()) {  // still open: a retry closes it
                 CHECK_FALSE(opened.empty());
                 require_ok(opened.close());
             }
         }},
        {"IpcEvent::open (another process's event)",
         [&peer_event](Trial& t) {
             t.operation([&] { return cudyn::import_ipc_event(peer_event); });
         }},
    };
}

// Exports a buffer and an event for the sweep's open rows, then waits.
int sweep_exporter_role(int, char**) {
    return run_role("fault-sweep-exporter", [](ChildChecks& check, cudyn::FdChannel& channel) {
        auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(1024);
        auto event = cudyn::IpcEvent::create();
        if (!ok(check, buffer, "allocate") || !ok(check, event, "event")) return;
        auto memory = export_ipc_memory(*buffer);
        auto event_descriptor = export_ipc_event(*event);
        if (!ok(check, memory, "export memory") || !ok(check, event_descriptor, "export event")) return;
        ok(check, send_bytes(channel, kMemDescriptor, memory->to_bytes()), "send memory");
        ok(check, send_bytes(channel, kEventDescriptor, event_descriptor->to_bytes()), "send event");
        ok(check, channel.receive(kDone, std::chrono::seconds(120)), "the sweep's end");
    });
}
const cudyn_test::ChildRole sweep_exporter("fault-sweep-exporter", sweep_exporter_role);

// ---- sharing any allocation ----------------------------------------------------------------------

// What another process shared with export_allocation, one of each kind.
struct PeerShares {
    cudyn::AllocationDescriptor legacy;
    cudyn::AllocationDescriptor vmm;
    cudyn::AllocationDescriptor pool;
    cudyn::MemoryPool imported_pool;            // the sharer's pool, imported here
    cudyn::PoolPointerDescriptor pool_pointer;  // its pool allocation, for import_pool_pointer
};

// Four granules reserved, two of POSIX-fd memory mapped at the second, filled.
struct SharedVmm {
    cudyn::AddressRange range = take(cudyn::AddressRange::reserve(4 * kChunk));
    cudyn::PhysicalMemory memory = take(cudyn::PhysicalMemory::create(
        AllocationProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor), 2 * kChunk));
    cudyn::MappedRange mapping =
        take(cudyn::MappedRange::map(range, kChunk, memory, {{Location::device(0), AccessFlags::ReadWrite}}));
};

std::vector<Row> share_any_rows(const PeerShares& peer) {
    const auto opened_rows = [](const char* name, const cudyn::AllocationDescriptor& shared) {
        return Row{name, [&shared](Trial& t) {
                       t.operation([&] { return cudyn::import_allocation(shared); });
                       auto again = take(cudyn::import_allocation(shared));  // nothing left claimed or mapped
                       CHECK(all_equal(again.device_address(), again.size_bytes(), kStamp));
                   }};
    };
    const auto close_row = [](const char* name, const cudyn::AllocationDescriptor& shared) {
        return Row{name, [&shared](Trial& t) {
                       auto opened = take(cudyn::import_allocation(shared));
                       t.operation([&] { return opened.close(); });
                       if (t.injected()) {  // what the driver still holds stays held: a retry closes it
                           CHECK_FALSE(opened.empty());
                           require_ok(opened.close());
                       }
                       CHECK(opened.empty());
                   }};
    };
    return {
        {"export_allocation (cuMemAlloc memory)",
         [](Trial& t) {
             auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
             t.operation([&] { return cudyn::export_allocation(buffer.device_address() + 256, 512); });
         }},
        {"export_allocation (VMM memory, a POSIX descriptor)",
         [](Trial& t) {
             SharedVmm vmm;
             t.operation([&] { return cudyn::export_allocation(vmm.mapping.device_address() + 4096, 4096); });
         }},
        {"export_allocation (pool memory, the pool's POSIX descriptor)",
         [](Trial& t) {
             auto pool = take(cudyn::MemoryPool::create(
                 cudyn::PoolProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor)));
             auto stream = take(cudyn::Stream::create());
             auto buffer = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, 1024, stream));
             t.operation([&] { return cudyn::export_allocation(buffer.device_address() + 256, 512); });
             require_ok(buffer.free());
             require_ok(stream.synchronize());
         }},
        opened_rows("import_allocation (another process's cuMemAlloc memory)", peer.legacy),
        opened_rows("import_allocation (another process's VMM memory)", peer.vmm),
        opened_rows("import_allocation (another process's pool memory)", peer.pool),
        close_row("ImportedAllocation::close (VMM memory)", peer.vmm),
        close_row("ImportedAllocation::close (pool memory)", peer.pool),
        {"ImportedPoolMemory::free(stream)",
         [&peer](Trial& t) {
             auto stream = take(cudyn::Stream::create());
             auto imported = take(cudyn::import_pool_pointer(peer.imported_pool, peer.pool_pointer));
             t.operation([&] { return imported.free(stream); });
             if (t.injected()) {  // still owned and still mapped: a retry frees it on the stream
                 CHECK_FALSE(imported.empty());
                 CHECK(all_equal(imported.device_address(), imported.size_bytes(), kStamp));
                 require_ok(imported.free(stream));
             }
             CHECK(imported.empty());
             require_ok(stream.synchronize());
         }},
        {"PitchedBuffer::allocate",
         [](Trial& t) { t.operation([] { return cudyn::PitchedBuffer::allocate(100, 8, 2); }); }},
        {"copy_3d (synchronous, host to pitched device memory)",
         [](Trial& t) {
             auto volume = take(cudyn::PitchedBuffer::allocate(16, 4, 2));
             std::vector<unsigned char> host(16 * 4 * 2, 0x5A);
             const auto source = take(cudyn::PitchedSpan::host(host.data(), 16, 16, 4, 2));
             t.operation([&] { return cudyn::copy_3d({volume.span(), {}, source, {}, {16, 4, 2}}); });
             require_ok(cudyn::copy_3d({volume.span(), {}, source, {}, {16, 4, 2}}));  // a retry does it
         }},
        {"PitchedSpan::fill (synchronous, 16-bit)",
         [](Trial& t) {
             auto buffer = take(cudyn::PitchedBuffer::allocate(16, 4));
             t.operation([&] { return buffer.span().fill(std::uint16_t{7}); });
             require_ok(buffer.span().fill(std::uint16_t{7}));
         }},
        {"CopyPlan::execute(stream) (a 3D batch and a 1D batch)",
         [](Trial& t) {
             auto stream = take(cudyn::Stream::create());
             auto image = take(cudyn::PitchedBuffer::allocate(32, 4));
             auto flat = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(64));
             require_ok(flat.fill(9u));
             std::vector<unsigned char> host(32 * 4, 0x42);
             const auto source = take(cudyn::PitchedSpan::host(host.data(), 32, 32, 4));
             cudyn::CopyPlan plan;
             require_ok(plan.add_3d({image.span(), {}, source, {}, {32, 4, 1}}));
             require_ok(plan.add(take(flat.device_span().subspan(0, 32)), take(flat.device_span().subspan(32, 32))));
             t.operation([&] { return plan.execute(stream); });
             if (t.injected() && t.fault().rfind("cuMemcpy3DBatchAsync", 0) == 0)
                 CHECK(t.error().find("1D copies had been issued") != std::string::npos);
             require_ok(stream.synchronize());
             (void)take(plan.execute(stream));
             require_ok(stream.synchronize());
         }},
        {"PrefetchPlan::execute(stream) (a discard, a discard-and-prefetch, a prefetch)",
         [](Trial& t) {
             auto stream = take(cudyn::Stream::create());
             auto managed = take(cudyn::ManagedBuffer<std::uint32_t>::allocate(3072));
             cudyn::PrefetchPlan plan;
             require_ok(plan.add_discard(take(managed.managed_range(0, 1024))));
             require_ok(plan.add_discard_and_prefetch(take(managed.managed_range(1024, 1024)), Location::device(0)));
             require_ok(plan.add(take(managed.managed_range(2048, 1024)), Location::host()));
             t.operation([&] { return plan.execute(stream); });
             require_ok(stream.synchronize());
             require_ok(plan.execute(stream));
             require_ok(stream.synchronize());
         }},
    };
}

// Shares one allocation of each kind (filled with kStamp) for the sweep's
// open rows, then waits.
int sweep_sharer_role(int, char**) {
    return run_role("fault-sweep-sharer", [](ChildChecks& check, cudyn::FdChannel& channel) {
        auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(1024);
        auto pool = cudyn::MemoryPool::create(
            cudyn::PoolProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor));
        auto stream = cudyn::Stream::create();
        auto range = cudyn::AddressRange::reserve(4 * kChunk);
        auto memory = cudyn::PhysicalMemory::create(
            AllocationProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor), 2 * kChunk);
        if (!ok(check, buffer, "allocate") || !ok(check, pool, "pool") || !ok(check, stream, "stream") ||
            !ok(check, range, "reserve") || !ok(check, memory, "create"))
            return;
        auto mapping = cudyn::MappedRange::map(*range, kChunk, *memory, {{Location::device(0), AccessFlags::ReadWrite}});
        auto pooled = cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(*pool, 1024, *stream);
        if (!ok(check, mapping, "map") || !ok(check, pooled, "allocate from the pool")) return;
        ok(check, buffer->fill(kStamp), "fill");
        ok(check, pooled->fill(kStamp), "fill the pool memory");
        ok(check, set_words(mapping->device_address(), 2 * kChunk, kStamp), "fill the VMM memory");
        const CUdeviceptr parts[] = {buffer->device_address() + 256, mapping->device_address() + 4096,
                                     pooled->device_address() + 256};
        for (const CUdeviceptr part : parts) {
            auto shared = cudyn::export_allocation(part, 512);
            if (ok(check, shared, "export_allocation")) ok(check, cudyn::send_descriptor(channel, *shared), "send_descriptor");
        }
        // The pool and the pointer once more, as import_pool_pointer takes them.
        auto pool_fd = cudyn::export_pool_fd(*pool);
        auto pointer = cudyn::export_pool_pointer(*pool, *pooled);
        if (ok(check, pool_fd, "export_pool_fd") && ok(check, pointer, "export_pool_pointer")) {
            ok(check, cudyn::send_descriptor(channel, *pool_fd), "send the pool");
            ok(check, send_bytes(channel, kMemDescriptor, pointer->to_bytes()), "send the pointer");
        }
        ok(check, channel.receive(kDone, std::chrono::seconds(120)), "the sweep's end");
        ok(check, pooled->free(), "free the pool memory");
        ok(check, stream->synchronize(), "synchronize");
    });
}
const cudyn_test::ChildRole sweep_sharer("fault-sweep-sharer", sweep_sharer_role);

// ---- sharing a whole range ------------------------------------------------------------------------

// A shareable GrowableBuffer of `chunks` chunks (room for 8), filled.
GrowableBuffer shareable_growable(std::size_t chunks) {
    auto buffer = take(GrowableBuffer::create(
        AllocationProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor), 8 * kChunk));
    require_ok(buffer.grow_to(chunks * kChunk));
    require_ok(take(buffer.device_span_as<std::uint32_t>()).fill(kStamp));
    return buffer;
}

// `descriptor` as another process receives it (import_range refuses a
// process's own exports): another exporter identity, its own descriptors.
cudyn::RangeDescriptor received(const cudyn::RangeDescriptor& descriptor) {
    auto copy = take(descriptor.duplicate());
    copy.exporter = cudyn::detail::RecordAccess::exporter(descriptor.exporter.pid() + 1, descriptor.exporter.token() ^ 1);
    return copy;
}

std::vector<Row> range_rows() {
    return {
        {"RangeExporter::create (three chunks)",
         [](Trial& t) {
             auto buffer = shareable_growable(3);
             t.operation([&] { return cudyn::RangeExporter::create(buffer); });
         }},
        {"RangeExporter::update (two chunks grown)",
         [](Trial& t) {
             auto buffer = shareable_growable(1);
             auto exporter = take(cudyn::RangeExporter::create(buffer));
             require_ok(buffer.grow_to(3 * kChunk));
             t.operation([&] { return exporter.update(); });
             if (t.injected()) {  // nothing published: a retry sends the same update
                 CHECK(exporter.generation() == 1);
                 const auto retried = take(exporter.update());
                 CHECK(retried.kept_chunks == 1);
                 CHECK(retried.chunks.size() == 2);
             }
         }},
        {"import_range (three chunks)",
         [](Trial& t) {
             auto buffer = shareable_growable(3);
             const auto layout = take(take(cudyn::RangeExporter::create(buffer)).describe());
             t.operation([&] { return cudyn::import_range(received(layout)); });
             auto again = take(cudyn::import_range(received(layout)));
             CHECK(all_equal(again.device_address(), again.size_bytes(), kStamp));
         }},
        {"ImportedRange::apply (two chunks grown)",
         [](Trial& t) {
             auto buffer = shareable_growable(1);
             auto exporter = take(cudyn::RangeExporter::create(buffer));
             auto imported = take(cudyn::import_range(received(take(exporter.describe()))));
             require_ok(buffer.grow_to(3 * kChunk));
             require_ok(take(buffer.device_span_as<std::uint32_t>()).fill(kStamp));
             const auto update = take(exporter.update());
             t.operation([&] { return imported.apply(received(update)); });
             if (t.injected()) {  // a growth that failed leaves the import as it was
                 CHECK(imported.chunk_count() == 1);
                 CHECK(imported.generation() == 1);
                 require_ok(imported.apply(received(update)));
             }
             CHECK(all_equal(imported.device_address(), 3 * kChunk, kStamp));
         }},
        {"ImportedRange::close (three chunks)",
         [](Trial& t) {
             auto buffer = shareable_growable(3);
             auto imported =
                 take(cudyn::import_range(received(take(take(cudyn::RangeExporter::create(buffer)).describe()))));
             t.operation([&] { return imported.close(); });
             if (t.injected()) require_ok(imported.close());  // what the driver kept is still held
             CHECK(imported.empty());
         }},
    };
}

// ---- checkpoints: the controller's steps on a child, the target's preparation -------------------

std::string device0_uuid() { return take(take(cudyn::Device::get(0)).uuid()).to_string(); }
constexpr auto kLockTimeout = std::chrono::seconds(5);

// Calls that switch to the context of what they work on and back. The
// caller's context is device 1's; what the operation works on is device 0's.
// The caller's context is back when the operation returns, or the operation
// failed saying it is not: then device 0's is still current (the only way
// the sweep can fail a put-back is to fail a cuCtxSetCurrent that follows a
// switch, an even-numbered one). The sweep's device-0 context is made
// current again afterwards.
struct CallerOnDevice1 {
    cudyn::PrimaryContext context0 = take(cudyn::PrimaryContext::retain(take(cudyn::Device::get(0))));
    cudyn::PrimaryContext context1 = take(cudyn::PrimaryContext::retain(take(cudyn::Device::get(1))));

    void enter() const { require_ok(context1.make_current()); }
    void check_and_leave(const Trial& t) const {
        CUcontext current = nullptr;
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuCtxGetCurrent_v4000, &current));
        const std::string prefix = "cuCtxSetCurrent:";
        const bool put_back_failed = t.injected() && t.fault().rfind(prefix, 0) == 0 &&
                                     std::stoi(t.fault().substr(prefix.size())) % 2 == 0;
        INFO("error: " << t.error());
        if (put_back_failed) {
            CHECK(t.error().find("the caller's context could not be put back") != std::string::npos);
            CHECK(current == context0.handle());
        } else {
            CHECK(current == context1.handle());
        }
        require_ok(context0.make_current());
    }
};

std::vector<Row> context_switch_rows(const IpcMemoryDescriptor& peer_memory) {
    return {
        {"copy_peer (synchronous, into device 0, the caller's context device 1's)",
         [](Trial& t) {
             const CallerOnDevice1 caller;
             auto destination = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
             require_ok(caller.context1.make_current());
             auto source = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
             require_ok(source.fill(kStamp));
             t.operation([&] {
                 return cudyn::copy_peer(destination.device_span(), caller.context0, source.device_span(), caller.context1);
             });
             caller.check_and_leave(t);
             require_ok(cudyn::copy_peer(destination.device_span(), caller.context0, source.device_span(), caller.context1));
             CHECK(read_device(destination.device_address(), 1024) == std::vector<std::uint32_t>(1024, kStamp));
         }},
        {"copy_peer(stream) (a device-0 stream, the caller's context device 1's)",
         [](Trial& t) {
             const CallerOnDevice1 caller;
             auto destination = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
             auto stream = take(cudyn::Stream::create());
             require_ok(caller.context1.make_current());
             auto source = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
             require_ok(source.fill(kStamp));
             t.operation([&] {
                 return cudyn::copy_peer(destination.device_span(), caller.context0, source.device_span(),
                                         caller.context1, stream);
             });
             caller.check_and_leave(t);
             require_ok(stream.synchronize());
         }},
        {"device_memory_info (device 0's, the caller's context device 1's)",
         [](Trial& t) {
             const CallerOnDevice1 caller;
             caller.enter();
             t.operation([&] { return cudyn::device_memory_info(caller.context0); });
             caller.check_and_leave(t);
         }},
        {"enable_peer_access (from device 0, the caller's context device 1's)",
         [](Trial& t) {
             const CallerOnDevice1 caller;
             require_ok(cudyn::disable_peer_access(caller.context0, caller.context1));
             caller.enter();
             t.operation([&] { return cudyn::enable_peer_access(caller.context0, caller.context1); });
             caller.check_and_leave(t);
             require_ok(cudyn::enable_peer_access(caller.context0, caller.context1));
             require_ok(cudyn::disable_peer_access(caller.context0, caller.context1));
         }},
        {"disable_peer_access (from device 0, the caller's context device 1's)",
         [](Trial& t) {
             const CallerOnDevice1 caller;
             require_ok(cudyn::enable_peer_access(caller.context0, caller.context1));
             caller.enter();
             t.operation([&] { return cudyn::disable_peer_access(caller.context0, caller.context1); });
             caller.check_and_leave(t);
             require_ok(cudyn::disable_peer_access(caller.context0, caller.context1));
         }},
        {"Event::wait (a device-0 stream, the caller's context device 1's)",
         [](Trial& t) {
             const CallerOnDevice1 caller;
             auto stream = take(cudyn::Stream::create());
             auto event = take(cudyn::Event::create());
             require_ok(event.record(stream));
             caller.enter();
             t.operation([&] { return event.wait(stream); });
             caller.check_and_leave(t);
             require_ok(stream.synchronize());
         }},
        {"IpcEvent::record (a device-0 stream, the caller's context device 1's)",
         [](Trial& t) {
             const CallerOnDevice1 caller;
             auto stream = take(cudyn::Stream::create());
             auto event = take(cudyn::IpcEvent::create());
             caller.enter();
             t.operation([&] { return event.record(stream); });
             caller.check_and_leave(t);
             require_ok(event.synchronize());
         }},
        {"Stream::destroy (device 0's, the caller's context device 1's)",
         [](Trial& t) {
             const CallerOnDevice1 caller;
             auto stream = take(cudyn::Stream::create());
             caller.enter();
             t.operation([&] { return stream.destroy(); });
             caller.check_and_leave(t);
             require_ok(stream.destroy());  // destroyed once the driver took it, put-back or not
         }},
        {"Event::destroy (device 0's, the caller's context device 1's)",
         [](Trial& t) {
             const CallerOnDevice1 caller;
             auto event = take(cudyn::Event::create());
             caller.enter();
             t.operation([&] { return event.destroy(); });
             caller.check_and_leave(t);
             require_ok(event.destroy());
         }},
        {"Event::record (a device-0 stream, the caller's context device 1's)",
         [](Trial& t) {
             const CallerOnDevice1 caller;
             auto stream = take(cudyn::Stream::create());
             auto event = take(cudyn::Event::create());
             caller.enter();
             t.operation([&] { return event.record(stream); });
             caller.check_and_leave(t);
             require_ok(event.synchronize());
         }},
        {"StreamOrderedBuffer::copy_from(host) (a device-0 stream, the caller's context device 1's)",
         [](Trial& t) {
             const CallerOnDevice1 caller;
             auto pool = take(cudyn::MemoryPool::create(cudyn::PoolProperties::device(0)));
             auto stream = take(cudyn::Stream::create());
             auto buffer = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, 1024, stream));
             const std::vector<std::uint32_t> values = iota_vector(1024, 7);
             caller.enter();
             t.operation([&] { return buffer.copy_from(values); });
             caller.check_and_leave(t);
             require_ok(buffer.free());
             require_ok(stream.synchronize());
         }},
        {"ImportedIpcMemory::suspend (device 0's import, the caller's context device 1's)",
         [&peer_memory](Trial& t) {
             const CallerOnDevice1 caller;
             auto memory = take(cudyn::import_ipc_memory(peer_memory));
             caller.enter();
             t.operation([&] { return memory.suspend(); });
             caller.check_and_leave(t);
             // Closed by the driver, put-back or not: recorded as suspended. Else still open; a retry suspends.
             const bool closed = !t.injected() || t.error().find("could not be put back") != std::string::npos;
             CHECK(memory.suspended() == closed);
             if (!closed) require_ok(memory.suspend());
             require_ok(memory.resume());
             CHECK(memory.device_address() != 0);
         }},
        {"ImportedIpcMemory::resume (device 0's import, the caller's context device 1's)",
         [&peer_memory](Trial& t) {
             const CallerOnDevice1 caller;
             auto memory = take(cudyn::import_ipc_memory(peer_memory));
             require_ok(memory.suspend());
             caller.enter();
             t.operation([&] { return memory.resume(); });
             caller.check_and_leave(t);
             // Open again, put-back or not: recorded so. Else still suspended; a retry resumes.
             const bool opened = !t.injected() || t.error().find("could not be put back") != std::string::npos;
             CHECK(memory.suspended() != opened);
             if (!opened) require_ok(memory.resume());
             CHECK(memory.device_address() != 0);
         }},
        {"DeviceBuffer::free (device 0's, the caller's context device 1's)",
         [](Trial& t) {
             const CallerOnDevice1 caller;
             auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
             caller.enter();
             t.operation([&] { return buffer.free(); });
             caller.check_and_leave(t);
             // Freed once the driver took it, put-back or not; else still owned, and a retry frees.
             require_ok(buffer.free());
             CHECK(buffer.empty());
         }},
        {"StreamOrderedBuffer::free (a device-0 stream, the caller's context device 1's)",
         [](Trial& t) {
             const CallerOnDevice1 caller;
             auto pool = take(cudyn::MemoryPool::create(cudyn::PoolProperties::device(0)));
             auto stream = take(cudyn::Stream::create());
             auto buffer = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, 1024, stream));
             caller.enter();
             t.operation([&] { return buffer.free(); });
             caller.check_and_leave(t);
             require_ok(buffer.free());
             require_ok(stream.synchronize());
         }},
    };
}

std::vector<Row> checkpoint_rows(const IpcMemoryDescriptor& peer_memory) {
    using cudyn::ProcessCheckpoint;
    using cudyn::ProcessState;
    return {
        {"ProcessCheckpoint::lock (a child)",
         [](Trial& t) {
             CheckpointTarget target(device0_uuid());
             // The owner goes with the Result: a lock that held is let go.
             t.operation([&] { return ProcessCheckpoint::lock(target.pid(), kLockTimeout); });
             CHECK(take(cudyn::process_state(target.pid())) == ProcessState::Running);
             CHECK(target.verified());
         }},
        {"ProcessCheckpoint::checkpoint (a child)",
         [](Trial& t) {
             CheckpointTarget target(device0_uuid());
             auto owner = take(ProcessCheckpoint::lock(target.pid(), kLockTimeout));
             t.operation([&] { return owner.checkpoint(); });
             if (t.injected()) {  // refused: still locked, and a retry checkpoints
                 CHECK(owner.state() == ProcessState::Locked);
                 REQUIRE(owner.failure().has_value());
                 CHECK(owner.failure()->step == cudyn::CheckpointStep::Checkpoint);
                 require_ok(owner.checkpoint());
             }
             require_ok(owner.finish());
             CHECK(target.verified());
         }},
        {"ProcessCheckpoint::restore (a child)",
         [](Trial& t) {
             CheckpointTarget target(device0_uuid());
             auto owner = take(ProcessCheckpoint::lock(target.pid(), kLockTimeout));
             require_ok(owner.checkpoint());
             t.operation([&] { return owner.restore(); });
             if (t.injected()) {  // refused: still checkpointed; finish() restores
                 CHECK(owner.state() == ProcessState::Checkpointed);
                 CHECK(take(cudyn::process_state(target.pid())) == ProcessState::Checkpointed);
             }
             require_ok(owner.finish());
             CHECK(target.verified());
         }},
        {"ProcessCheckpoint::unlock (a child)",
         [](Trial& t) {
             CheckpointTarget target(device0_uuid());
             auto owner = take(ProcessCheckpoint::lock(target.pid(), kLockTimeout));
             t.operation([&] { return owner.unlock(); });
             if (t.injected()) {  // refused: still locked; a retry unlocks
                 CHECK(owner.state() == ProcessState::Locked);
                 require_ok(owner.unlock());
             }
             CHECK(take(cudyn::process_state(target.pid())) == ProcessState::Running);
             CHECK(target.verified());
         }},
        {"CheckpointPreparation::prepare (a range of three chunks, IPC memory)",
         [&peer_memory](Trial& t) {
             auto buffer = shareable_growable(3);
             auto range = take(cudyn::import_range(received(take(take(cudyn::RangeExporter::create(buffer)).describe()))));
             auto memory = take(cudyn::import_ipc_memory(peer_memory));
             const CUdeviceptr address = range.device_address();
             cudyn::CheckpointPreparation preparation;
             require_ok(preparation.add(range));
             require_ok(preparation.add(memory, cudyn::AddressChange::Allowed));
             t.operation([&] { return preparation.prepare(); });
             if (t.injected()) {  // rolled back: both open, the range where it was; a retry prepares
                 CHECK_FALSE(preparation.prepared());
                 CHECK_FALSE(range.suspended());
                 CHECK_FALSE(memory.suspended());
                 CHECK(all_equal(address, 3 * kChunk, kStamp));
                 require_ok(preparation.prepare());
             }
             CHECK(range.suspended());
             CHECK(memory.suspended());
             require_ok(preparation.resume());
             CHECK(range.device_address() == address);
             CHECK(all_equal(address, 3 * kChunk, kStamp));
             CHECK(memory.device_address() != 0);
         }},
        {"CheckpointPreparation::resume (a range of three chunks, IPC memory)",
         [&peer_memory](Trial& t) {
             auto buffer = shareable_growable(3);
             auto range = take(cudyn::import_range(received(take(take(cudyn::RangeExporter::create(buffer)).describe()))));
             auto memory = take(cudyn::import_ipc_memory(peer_memory));
             const CUdeviceptr address = range.device_address();
             cudyn::CheckpointPreparation preparation;
             require_ok(preparation.add(range));
             require_ok(preparation.add(memory, cudyn::AddressChange::Allowed));
             require_ok(preparation.prepare());
             t.operation([&] { return preparation.resume(); });
             if (t.injected()) {  // still prepared: what is suspended stays so; a retry resumes the rest
                 CHECK(preparation.prepared());
                 CHECK((range.suspended() || memory.suspended()));
                 require_ok(preparation.resume());
             }
             CHECK_FALSE(preparation.prepared());
             CHECK(range.device_address() == address);
             CHECK(all_equal(address, 3 * kChunk, kStamp));
             CHECK(memory.device_address() != 0);
         }},
    };
}

// Runs each row warm, recording, then once per recorded call with that call
// failed, checking the baseline after each run. The injection points in all.
std::size_t sweep(const std::vector<Row>& all_rows) {
    std::size_t total = 0;
    for (const Row& row : all_rows) {
        INFO("operation: " << row.name);
        Trial warm(Trial::Mode::Plain, {});
        row.body(warm);
        REQUIRE(warm.ran());
        const Baseline before = Baseline::now();
        Trial recording(Trial::Mode::Record, {});
        row.body(recording);
        require_same(before, Baseline::now());
        const auto points = injection_points(recording.calls());
        INFO("driver calls: " << points.size());
        CHECK(points.size() >= 1);  // an operation with no injection point means the recording broke
        for (const std::string& point : points) {
            INFO("failed call: " << point);
            Trial trial(Trial::Mode::Inject, point);
            row.body(trial);
            require_same(before, Baseline::now());
        }
        total += points.size();
    }
    return total;
}

}  // namespace

TEST_CASE("fault sweep: every multi-call operation, each of its driver calls failed in turn (fabric ones modelled)",
          "[emulated][fault-sweep][modelled]") {
    auto context = activate(0);
    ParentSide side = start_child("fault-sweep-exporter");
    const auto peer_memory = take(receive_descriptor<IpcMemoryDescriptor>(side.channel, kMemDescriptor));
    const auto peer_event = take(receive_descriptor<cudyn::IpcEventDescriptor>(side.channel, kEventDescriptor));
    ParentSide sharer = start_child("fault-sweep-sharer");
    auto legacy_share = take(cudyn::receive_allocation(sharer.channel));
    auto vmm_share = take(cudyn::receive_allocation(sharer.channel));
    auto pool_share = take(cudyn::receive_allocation(sharer.channel));
    auto sharer_pool = take(cudyn::receive_pool_fd(sharer.channel).and_then(cudyn::import_pool_fd));
    const PeerShares peer_shares{std::move(legacy_share), std::move(vmm_share), std::move(pool_share),
                                 std::move(sharer_pool),
                                 take(receive_descriptor<cudyn::PoolPointerDescriptor>(sharer.channel, kMemDescriptor))};
    std::vector<Row> all_rows = rows(peer_memory, peer_event);
    for (Row& row : share_any_rows(peer_shares)) all_rows.push_back(std::move(row));
    for (Row& row : range_rows()) all_rows.push_back(std::move(row));
    for (Row& row : context_switch_rows(peer_memory)) all_rows.push_back(std::move(row));

    const std::size_t total = sweep(all_rows);
    INFO("injection points in all: " << total);
    CHECK(total > 100);
    require_ok(send_tag(side.channel, kDone));
    CHECK(side.child.wait(kChildTimeout) == 0);
    require_ok(send_tag(sharer.channel, kDone));
    CHECK(sharer.child.wait(kChildTimeout) == 0);
}

// Apart from the rows above: a preparation refuses while an import it was
// not given blocks, and the sweep above holds an imported pool throughout.
TEST_CASE("fault sweep: the checkpoint steps on a child, and a target's prepare and resume",
          "[emulated][fault-sweep]") {
    auto context = activate(0);
    ParentSide side = start_child("fault-sweep-exporter");
    const auto peer_memory = take(receive_descriptor<IpcMemoryDescriptor>(side.channel, kMemDescriptor));
    const auto peer_event = take(receive_descriptor<cudyn::IpcEventDescriptor>(side.channel, kEventDescriptor));
    (void)peer_event;
    const std::size_t total = sweep(checkpoint_rows(peer_memory));
    INFO("injection points in all: " << total);
    CHECK(total >= 10);
    require_ok(send_tag(side.channel, kDone));
    CHECK(side.child.wait(kChildTimeout) == 0);
}
