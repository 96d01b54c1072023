// The target's side of a checkpoint against the emulated fake: what blocks
// one (checkpoint_blockers, one import of each kind), and a
// CheckpointPreparation that closes a child's imports before its parent
// checkpoints it and opens them again after (a range at the same address,
// legacy IPC memory wherever the driver puts it), bytes checked; a refused
// resume that leaves everything usable; the refusals before any driver call.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/ipc_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "core/internal.hpp"     // detail::hex
#include "core/wire_format.hpp"  // detail::RecordAccess

#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/checkpoint/checkpoint_blockers.hpp"
#include "cudyn/checkpoint/checkpoint_preparation.hpp"
#include "cudyn/checkpoint/process_checkpoint.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"
#include "cudyn/share/descriptor_transfer.hpp"
#include "cudyn/share/imported_ipc_memory.hpp"
#include "cudyn/share/ipc_memory.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"
#include "cudyn/share/pool_sharing.hpp"
#include "cudyn/share/range_sharing.hpp"
#include "cudyn/vmm/growable_buffer.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

using cudyn::AccessFlags;
using cudyn::AllocationProperties;
using cudyn::ErrorCode;
using cudyn::GrowableBuffer;
using cudyn::HandleType;
using cudyn::ImportKind;
using cudyn::Location;
using namespace cudyn_test;
using namespace cudyn_test::ipc;

namespace {

constexpr std::size_t kChunk = 2 * kMiB;
constexpr std::uint32_t kRangeStamp = 0x7A46E5u;
constexpr std::uint32_t kIpcStamp = 0x1BC0FFEEu;
constexpr std::uint32_t kPoolStamp = 0xB0015u;
// This exchange's own tags, past the helpers' (support/ipc_helpers.hpp).
constexpr auto kPrepared = static_cast<Tag>(20);
constexpr auto kCheckpointDone = static_cast<Tag>(21);
constexpr auto kVerdict = static_cast<Tag>(22);

std::size_t count_of(const std::vector<cudyn::CheckpointBlocker>& blockers, ImportKind kind) {
    std::size_t n = 0;
    for (const auto& b : blockers) n += b.import.kind == kind ? 1 : 0;
    return n;
}

// A shareable GrowableBuffer of `chunks` chunks (room for 8), filled.
GrowableBuffer shareable_growable(std::size_t chunks, std::uint32_t stamp) {
    auto buffer = take(GrowableBuffer::create(
        AllocationProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor), 8 * kChunk));
    require_ok(buffer.grow_to(chunks * kChunk));
    require_ok(take(buffer.device_span_as<std::uint32_t>()).fill(stamp));
    return buffer;
}

// `descriptor` as another process receives it (import_range refuses a
// process's own exports): another exporter identity, its own descriptors.
cudyn::RangeDescriptor received(const cudyn::RangeDescriptor& descriptor) {
    auto copy = take(descriptor.duplicate());
    copy.exporter = cudyn::detail::RecordAccess::exporter(descriptor.exporter.pid() + 1, descriptor.exporter.token() ^ 1);
    return copy;
}

// The target: imports what its parent shares (legacy IPC memory, pool
// memory, physical memory, a whole range), checks what checkpoint_blockers
// says, lets prepare() refuse while the pool and physical imports are open,
// closes them, prepares, waits for the parent's checkpoint, resumes and
// checks the bytes: the range at its old address, the IPC memory wherever it
// opened again.
int checkpoint_importer_role(int, char**) {
    return run_role("checkpoint-importer", [](ChildChecks& check, cudyn::FdChannel& channel) {
        auto ipc_descriptor = receive_descriptor<cudyn::IpcMemoryDescriptor>(channel, kMemDescriptor);
        auto pool_fd = cudyn::receive_pool_fd(channel);
        auto pointer = receive_descriptor<cudyn::PoolPointerDescriptor>(channel, kMemDescriptor);
        auto memory_fd = cudyn::receive_memory_fd(channel);
        auto layout = cudyn::receive_range(channel);
        if (!ok(check, ipc_descriptor, "IPC descriptor") || !ok(check, pool_fd, "pool") ||
            !ok(check, pointer, "pool pointer") || !ok(check, memory_fd, "memory fd") || !ok(check, layout, "range"))
            return;
        auto ipc = cudyn::import_ipc_memory(*ipc_descriptor);
        auto pool = cudyn::import_pool_fd(std::move(*pool_fd));
        if (!ok(check, ipc, "import IPC") || !ok(check, pool, "import pool")) return;
        auto pooled = cudyn::import_pool_pointer(*pool, *pointer);
        auto physical = cudyn::import_memory_fd(std::move(*memory_fd));
        auto range = cudyn::import_range(std::move(*layout));
        if (!ok(check, pooled, "import pointer") || !ok(check, physical, "import physical") ||
            !ok(check, range, "import range"))
            return;

        const auto blockers = cudyn::checkpoint_blockers();
        check.expect(blockers.size() == 6, "six blockers, got " + std::to_string(blockers.size()));
        for (ImportKind kind : {ImportKind::IpcMemory, ImportKind::Pool, ImportKind::PoolMemory,
                                ImportKind::PhysicalMemory, ImportKind::Range, ImportKind::DescriptorChannel})
            check.expect(count_of(blockers, kind) == 1, std::string("one ") + cudyn::to_string(kind));
        for (const auto& b : blockers) {
            const bool in_place = b.import.kind == ImportKind::Range || b.import.kind == ImportKind::PhysicalMemory;
            check.expect(b.reopens_in_place == in_place, std::string("in place: ") + cudyn::to_string(b.import.kind));
            check.expect(b.blocks_driver == (b.import.kind != ImportKind::DescriptorChannel),
                         std::string("blocks the driver: ") + cudyn::to_string(b.import.kind));
            if (b.import.kind == ImportKind::Range) {
                check.expect(b.import.address == range->device_address(), "the range's address");
                check.expect(b.import.size_bytes == range->reserved_bytes(), "the range's reservation");
            }
            if (b.import.kind == ImportKind::IpcMemory) {
                check.expect(b.import.address == ipc->device_address(), "the IPC address");
                check.expect(b.import.size_bytes == ipc->size_bytes(), "the IPC size");
            }
            if (b.import.kind == ImportKind::PoolMemory)
                check.expect(b.import.address == pooled->device_address(), "the pool memory's address");
            if (b.import.kind == ImportKind::Pool)
                check.expect(b.import.address == reinterpret_cast<std::uintptr_t>(pool->handle()), "the pool's handle");
        }

        cudyn::CheckpointPreparation preparation;
        auto refused = preparation.add(*ipc, cudyn::AddressChange::Refused);
        check.expect(!refused && refused.error().code == ErrorCode::InvalidArgument &&
                         refused.error().message.find("same address") != std::string::npos,
                     "IPC memory refused without AddressChange::Allowed");
        ok(check, preparation.add(*ipc, cudyn::AddressChange::Allowed), "add IPC");
        ok(check, preparation.add(*range), "add range");
        auto blocked = preparation.prepare();
        check.expect(!blocked && blocked.error().code == ErrorCode::InvalidArgument &&
                         blocked.error().message.find("pool at ") != std::string::npos,
                     "prepare refuses while the imported pool is open (the oldest import not added): " +
                         (blocked ? std::string("it succeeded") : blocked.error().describe()));
        check.expect(!range->suspended() && !ipc->suspended(), "a refused prepare closed nothing");
        ok(check, pooled->free(), "free the pool memory");
        auto still = preparation.prepare();
        check.expect(!still && still.error().message.find("pool at ") != std::string::npos, "the pool still blocks");
        ok(check, pool->destroy(), "let the imported pool go");
        ok(check, physical->release(), "release the physical memory");
        ok(check, preparation.prepare(), "prepare");
        check.expect(range->suspended() && ipc->suspended() && range->size_bytes() == 0, "both suspended");
        const auto left = cudyn::checkpoint_blockers();
        check.expect(left.size() == 1 && left[0].import.kind == ImportKind::DescriptorChannel,
                     "only the channel is left, and it does not block the driver");
        const CUdeviceptr range_address = range->device_address();
        ok(check, send_tag(channel, kPrepared), "tell the parent");
        if (!ok(check, channel.receive(kCheckpointDone, std::chrono::seconds(60)), "the parent's checkpoint")) return;

        ok(check, preparation.resume(), "resume");
        check.expect(!preparation.prepared() && !range->suspended() && !ipc->suspended(), "resumed");
        check.expect(range->device_address() == range_address, "the range is at the same address");
        check.expect(range->size_bytes() == 2 * kChunk, "both chunks mapped");
        check.expect(same_words(range->device_address(), range->size_bytes(), kRangeStamp), "the range's bytes");
        check.expect(same_words(ipc->device_address(), ipc->size_bytes(), kIpcStamp), "the IPC bytes, wherever");
        check.expect(cudyn::checkpoint_blockers().size() == 3, "listed again (and the channel)");
        ok(check, send_tag(channel, kVerdict), "verdict");
        ok(check, channel.receive(kDone, std::chrono::seconds(60)), "the end");
    });
}
const cudyn_test::ChildRole checkpoint_importer("checkpoint-importer", checkpoint_importer_role);

// A target that does not prepare: it maps an imported range through the
// checkpoint (the fake does not refuse that; see ARCHITECTURE's fake model).
int unprepared_importer_role(int, char**) {
    return run_role("checkpoint-unprepared-importer", [](ChildChecks& check, cudyn::FdChannel& channel) {
        auto layout = cudyn::receive_range(channel);
        if (!ok(check, layout, "range")) return;
        auto range = cudyn::import_range(std::move(*layout));
        if (!ok(check, range, "import range")) return;
        ok(check, send_tag(channel, kPrepared), "tell the parent");
        if (!ok(check, channel.receive(kCheckpointDone, std::chrono::seconds(60)), "the parent's checkpoint")) return;
        check.expect(same_words(range->device_address(), range->size_bytes(), kRangeStamp), "the range's bytes");
        ok(check, send_tag(channel, kVerdict), "verdict");
        ok(check, channel.receive(kDone, std::chrono::seconds(60)), "the end");
    });
}
const cudyn_test::ChildRole unprepared_importer("checkpoint-unprepared-importer", unprepared_importer_role);

}  // namespace

TEST_CASE("a target lists its imports, prepares, is checkpointed and restored, and resumes them",
          "[emulated][checkpoint]") {
    auto context = activate(0);
    auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(kChunk / 4));
    require_ok(buffer.fill(kIpcStamp));
    auto pool = take(cudyn::MemoryPool::create(
        cudyn::PoolProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor)));
    auto stream = take(cudyn::Stream::create());
    auto pooled = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, 1024, stream));
    require_ok(pooled.fill(kPoolStamp));
    require_ok(stream.synchronize());
    auto physical = take(cudyn::PhysicalMemory::create(
        AllocationProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor), kChunk));
    auto growable = shareable_growable(2, kRangeStamp);

    ParentSide side = start_child("checkpoint-importer");
    require_ok(send_bytes(side.channel, kMemDescriptor, take(cudyn::export_ipc_memory(buffer)).to_bytes()));
    require_ok(cudyn::send_descriptor(side.channel, take(cudyn::export_pool_fd(pool))));
    require_ok(send_bytes(side.channel, kMemDescriptor, take(cudyn::export_pool_pointer(pool, pooled)).to_bytes()));
    require_ok(cudyn::send_descriptor(side.channel, take(cudyn::export_memory_fd(physical))));
    require_ok(cudyn::send_descriptor(side.channel, take(take(cudyn::RangeExporter::create(growable)).describe())));

    REQUIRE(side.channel.receive(kPrepared, std::chrono::seconds(60)).has_value());
    const int pid = static_cast<int>(side.child.pid());
    auto owner = take(cudyn::ProcessCheckpoint::lock(pid, std::chrono::seconds(5)));
    require_ok(owner.checkpoint());
    CHECK(take(cudyn::process_state(pid)) == cudyn::ProcessState::Checkpointed);
    // The exporter's memory is untouched by the target's checkpoint.
    CHECK(all_equal(growable.device_address(), growable.size_bytes(), kRangeStamp));
    require_ok(owner.restore());
    require_ok(owner.unlock());
    require_ok(send_tag(side.channel, kCheckpointDone));
    CHECK(side.channel.receive(kVerdict, std::chrono::seconds(60)).has_value());
    require_ok(send_tag(side.channel, kDone));
    CHECK(side.child.wait(kChildTimeout) == 0);
    require_ok(pooled.free());
    require_ok(stream.synchronize());
}

TEST_CASE("checkpoint_blockers lists physical, fabric (modelled), range and channel imports with what to do",
          "[emulated][checkpoint][modelled]") {
    auto context = activate(0);
    const std::size_t before = cudyn::checkpoint_blockers().size();
    std::string earlier;
    for (const auto& b : cudyn::checkpoint_blockers()) earlier += std::string(cudyn::to_string(b.import.kind)) + " ";
    INFO("listed before: " << earlier);
    const ScopedImexChannel imex;
    auto fd_memory = take(cudyn::PhysicalMemory::create(
        AllocationProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor), kChunk));
    auto fabric_memory = take(
        cudyn::PhysicalMemory::create(AllocationProperties::device(0).with_handle_types(HandleType::Fabric), kChunk));
    auto physical = take(cudyn::import_memory_fd(take(cudyn::export_memory_fd(fd_memory))));
    auto fabric = take(cudyn::import_memory_fabric(take(cudyn::export_memory_fabric(fabric_memory))));
    auto growable = shareable_growable(3, kRangeStamp);
    auto range = take(cudyn::import_range(received(take(take(cudyn::RangeExporter::create(growable)).describe()))));
    auto channels = take(cudyn::FdChannel::pair());

    const auto blockers = cudyn::checkpoint_blockers();
    std::string kinds;
    for (const auto& b : blockers) kinds += std::string(cudyn::to_string(b.import.kind)) + " ";
    INFO("listed: " << kinds);
    REQUIRE(blockers.size() == before + 5);  // two channel ends
    CHECK(count_of(blockers, ImportKind::PhysicalMemory) == 1);
    CHECK(count_of(blockers, ImportKind::FabricMemory) == 1);
    CHECK(count_of(blockers, ImportKind::Range) == 1);  // its three chunks are not listed on their own
    CHECK(count_of(blockers, ImportKind::DescriptorChannel) == 2);
    for (const auto& b : blockers) {
        CHECK(std::string(b.remedy).size() > 20);
        if (b.import.kind == ImportKind::Range) {
            CHECK(b.import.address == range.device_address());
            CHECK(b.import.size_bytes == 8 * kChunk);
            CHECK(b.import.device == 0);
            CHECK(b.reopens_in_place);
        }
        if (b.import.kind == ImportKind::PhysicalMemory) CHECK(b.import.size_bytes == kChunk);
        if (b.import.kind == ImportKind::DescriptorChannel) CHECK_FALSE(b.blocks_driver);
    }
    // Each leaves the list when it goes.
    require_ok(channels.first.close());
    require_ok(physical.release());
    require_ok(range.close());
    const auto after = cudyn::checkpoint_blockers();
    CHECK(after.size() == before + 2);
    CHECK(count_of(after, ImportKind::FabricMemory) == 1);
    CHECK(count_of(after, ImportKind::Range) == 0);
}

TEST_CASE("a resume refused half-way leaves the range suspended at its address; a retry maps it back",
          "[emulated][checkpoint]") {
    auto context = activate(0);
    auto growable = shareable_growable(3, kRangeStamp);
    auto range = take(cudyn::import_range(received(take(take(cudyn::RangeExporter::create(growable)).describe()))));
    const CUdeviceptr address = range.device_address();
    const long descriptors = open_descriptors();
    cudyn::CheckpointPreparation preparation;
    require_ok(preparation.add(range));
    require_ok(preparation.prepare());
    CHECK(range.suspended());
    CHECK(range.size_bytes() == 0);
    CHECK(range.chunk_count() == 0);
    // The second chunk's map is refused: the first is unmapped again.
    FakeDriver::loaded().set_fail("cuMemMap:2");
    auto refused = preparation.resume();
    FakeDriver::loaded().set_fail("");
    require_error(refused, ErrorCode::OutOfMemory, "ImportedRange::resume");
    CHECK(refused.error().message.find("resume() retries") != std::string::npos);
    CHECK(preparation.prepared());
    CHECK(range.suspended());
    CHECK(range.chunk_count() == 0);
    CHECK(range.device_address() == address);
    require_ok(preparation.resume());
    CHECK_FALSE(range.suspended());
    CHECK(range.device_address() == address);
    CHECK(all_equal(range.device_address(), 3 * kChunk, kRangeStamp));
    CHECK(open_descriptors() == descriptors);  // the kept descriptors stay, nothing more
    // Usable: it follows the exporter again.
    auto exporter = take(cudyn::RangeExporter::create(growable));
    CHECK(range.size_bytes() == 3 * kChunk);
    require_ok(range.close());
    (void)exporter;
}

TEST_CASE("a suspend refused by the driver leaves the range mapped and a prepare rolls back",
          "[emulated][checkpoint]") {
    auto context = activate(0);
    auto growable = shareable_growable(2, kRangeStamp);
    auto first = take(cudyn::import_range(received(take(take(cudyn::RangeExporter::create(growable)).describe()))));
    auto second = take(cudyn::import_range(received(take(take(cudyn::RangeExporter::create(growable)).describe()))));
    cudyn::CheckpointPreparation preparation;
    require_ok(preparation.add(first));
    require_ok(preparation.add(second));
    // Two unmaps for the first range, then the second range's first one fails.
    FakeDriver::loaded().set_fail("cuMemUnmap:3");
    auto refused = preparation.prepare();
    FakeDriver::loaded().set_fail("");
    require_error(refused, ErrorCode::OutOfMemory, "CheckpointPreparation::prepare");
    CHECK(refused.error().message.find("every import is open again") != std::string::npos);
    CHECK_FALSE(preparation.prepared());
    for (const auto* range : {&first, &second}) {
        CHECK_FALSE(range->suspended());
        CHECK(all_equal(range->device_address(), 2 * kChunk, kRangeStamp));
    }
    require_ok(preparation.prepare());
    require_ok(preparation.resume());
    CHECK(all_equal(second.device_address(), 2 * kChunk, kRangeStamp));
}

TEST_CASE("a preparation refuses bad input before any driver call", "[emulated][checkpoint]") {
    auto context = activate(0);
    cudyn::CheckpointPreparation preparation;
    cudyn::ImportedRange nothing;
    require_error(preparation.add(nothing), ErrorCode::InvalidArgument, "range is empty");
    cudyn::ImportedIpcMemory no_memory;
    require_error(preparation.add(no_memory, cudyn::AddressChange::Allowed), ErrorCode::InvalidArgument,
                  "IPC memory is empty");
    require_error(preparation.resume(), ErrorCode::InvalidArgument, "not prepared");
    require_error(nothing.suspend(), ErrorCode::InvalidArgument, "nothing is imported");
    require_error(nothing.resume(), ErrorCode::InvalidArgument, "not suspended");

    auto growable = shareable_growable(1, kRangeStamp);
    auto layout = take(take(cudyn::RangeExporter::create(growable)).describe());
    auto range = take(cudyn::import_range(received(layout)));
    auto other = take(cudyn::import_range(received(layout)));
    require_ok(preparation.add(range));
    require_error(preparation.add(range), ErrorCode::InvalidArgument, "already added");
    FakeDriver::loaded().record_calls(true);
    // `other` blocks and was not added: named, and nothing is closed.
    auto refused = preparation.prepare();
    FakeDriver::loaded().record_calls(false);
    require_error(refused, ErrorCode::InvalidArgument, "range at " + cudyn::detail::hex(other.device_address()));
    CHECK(refused.error().message.find("not in this preparation") != std::string::npos);
    CHECK(FakeDriver::loaded().recorded_calls().empty());
    CHECK_FALSE(range.suspended());
    require_ok(preparation.add(other));
    require_ok(preparation.prepare());
    require_error(preparation.prepare(), ErrorCode::InvalidArgument, "already prepared");
    require_error(preparation.add(range), ErrorCode::InvalidArgument, "resume() before adding");
    require_error(range.suspend(), ErrorCode::InvalidArgument, "already suspended");
    require_error(range.apply(cudyn::RangeDescriptor{}), ErrorCode::InvalidArgument, "resume() first");
    require_ok(preparation.resume());
    CHECK(all_equal(other.device_address(), kChunk, kRangeStamp));
    // A suspended range closes whole: its reservation and kept descriptors go.
    require_ok(range.suspend());
    require_ok(range.close());
    CHECK(range.empty());
}

TEST_CASE("the fake's checkpoint of an importer leaves the exporter's memory alone", "[emulated][checkpoint]") {
    auto context = activate(0);
    auto growable = shareable_growable(2, kRangeStamp);
    ParentSide side = start_child("checkpoint-unprepared-importer");
    require_ok(cudyn::send_descriptor(side.channel, take(take(cudyn::RangeExporter::create(growable)).describe())));
    REQUIRE(side.channel.receive(kPrepared, std::chrono::seconds(60)).has_value());
    const int pid = static_cast<int>(side.child.pid());
    auto owner = take(cudyn::ProcessCheckpoint::lock(pid, std::chrono::seconds(5)));
    require_ok(owner.checkpoint());
    // The target's own device memory is cleared while it is checkpointed;
    // the chunks it imported are this process's and keep their bytes.
    CHECK(all_equal(growable.device_address(), growable.size_bytes(), kRangeStamp));
    require_ok(owner.finish());
    require_ok(send_tag(side.channel, kCheckpointDone));
    CHECK(side.channel.receive(kVerdict, std::chrono::seconds(60)).has_value());
    require_ok(send_tag(side.channel, kDone));
    CHECK(side.child.wait(kChildTimeout) == 0);
}
