// Sharing a whole growable range ([range-share]): a GrowableBuffer's
// reservation and every chunk mapped in it, exported as one RangeDescriptor
// (one channel message per FdChannel::kMaxDescriptors chunks), imported whole
// by a second process (on device 0 or device 1) at one base address, which
// then follows the exporter's growth, shrinking and release/restore through
// updates that name only what changed. Bad descriptors and updates are
// refused before the driver; a failure half-way leaves nothing behind.
//
// The emulated fake backs VMM chunks with memfds, so the importer really
// reads the exporter's bytes; cuda11 (11.8) runs it too; legacy (10.1) has no
// VMM and says so.
#include "support/catch.hpp"
#include "support/child_process.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/ipc_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/share/range_sharing.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/growable_buffer.hpp"

#include "core/wire_format.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

using cudyn::AccessFlags;
using cudyn::AllocationProperties;
using cudyn::ErrorCode;
using cudyn::FdChannel;
using cudyn::FileDescriptor;
using cudyn::GrowableBuffer;
using cudyn::HandleType;
using cudyn::ImportedRange;
using cudyn::Location;
using cudyn::RangeChunk;
using cudyn::RangeDescriptor;
using cudyn::RangeExporter;
using cudyn_test::ChildChecks;
using cudyn_test::DriverSnapshot;
using cudyn_test::FakeDriver;
using cudyn_test::ScopedFault;
using namespace cudyn_test;  // activate, take, require_ok, require_error, kMiB
using namespace cudyn_test::ipc;

namespace {

constexpr std::size_t kChunk = 2 * kMiB;  // the fake's granularity
constexpr std::size_t kCapacity = 16 * kChunk;
constexpr std::uint32_t kReply = 0x0e0e0e0eu;

// What chunk `index` of the exporter holds in generation `generation`.
std::uint32_t word_of(std::size_t index, std::uint64_t generation) {
    return 0xa0000000u + static_cast<std::uint32_t>(generation << 8) + static_cast<std::uint32_t>(index);
}

GrowableBuffer shareable_buffer() {
    cudyn::GrowableBufferOptions options;
    options.chunk_size_bytes = kChunk;
    return take(GrowableBuffer::create(
        AllocationProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor), kCapacity, options));
}

// Fills chunks [from, to) of `buffer` with their words of `generation`.
void fill_chunks(const GrowableBuffer& buffer, std::size_t from, std::size_t to, std::uint64_t generation) {
    for (std::size_t i = from; i < to; ++i) fill32(buffer.device_address() + i * kChunk, kChunk, word_of(i, generation));
}

// The generation whose words each chunk holds, as the exporter wrote them.
bool chunks_hold(CUdeviceptr base, const std::vector<std::uint64_t>& generations) {
    for (std::size_t i = 0; i < generations.size(); ++i)
        if (!same_words(base + i * kChunk, kChunk, word_of(i, generations[i]))) return false;
    return true;
}

// A descriptor as another process would receive it: this process's own
// exports carry this process as exporter, which import_range refuses.
RangeDescriptor as_if_from_another(RangeDescriptor descriptor) {
    descriptor.exporter = cudyn::detail::RecordAccess::exporter(descriptor.exporter.pid() + 1,
                                                               descriptor.exporter.token() ^ 1);
    return descriptor;
}

// The consumer: imports the range (device `argv[0]`), then follows every
// update; after each it checks the base address, the chunk count and the
// generations of the chunk words it was told (one message of u64s:
// generation per chunk) and answers kDone; the first chunk's first word gets
// kReply written after the third update's check.
int consumer_role(int argc, char** argv) {
    const int device = argc > 0 ? std::stoi(argv[0]) : 0;
    return run_role(
        "range-consumer",
        [device](ChildChecks& check, FdChannel& channel) {
            const long descriptors = open_descriptors();
            {
                auto first = cudyn::receive_range(channel, kStep);
                if (!ok(check, first, "receive the layout")) return;
                auto imported = cudyn::import_range(std::move(*first), {{Location::device(device), AccessFlags::ReadWrite}});
                if (!ok(check, imported, "import_range on device " + std::to_string(device))) return;
                const CUdeviceptr base = imported->device_address();
                check.expect(imported->reserved_bytes() == kCapacity, "the whole reservation is reserved");
                for (;;) {
                    auto expected = channel.receive(kRawBytes, kStep);
                    if (!ok(check, expected, "the expected generations")) return;
                    std::vector<std::uint64_t> generations(expected->payload.size() / 8);
                    std::memcpy(generations.data(), expected->payload.data(), generations.size() * 8);
                    check.expect(imported->device_address() == base, "the base address never moves");
                    check.expect(imported->chunk_count() == generations.size(),
                                 "chunk count " + std::to_string(imported->chunk_count()) + ", expected " +
                                     std::to_string(generations.size()));
                    check.expect(chunks_hold(base, generations), "every chunk holds the exporter's bytes");
                    if (imported->generation() == 4)
                        ok(check, set_words(base, 4, kReply), "write the reply into chunk 0");
                    ok(check, send_tag(channel, kDone), "send 'done'");
                    auto next = cudyn::receive_range(channel, kStep);
                    if (!next && next.error().code == ErrorCode::Io) break;  // the exporter is done
                    if (!ok(check, next, "receive an update")) return;
                    if (!ok(check, imported->apply(std::move(*next)), "apply the update")) return;
                }
                ok(check, imported->close(), "close the import");
            }
            check.expect(open_descriptors() == descriptors, "no descriptor left open in the consumer");
        },
        device);
}
const cudyn_test::ChildRole consumer("range-consumer", consumer_role);

// Tells the consumer what each chunk should hold and waits for its check.
void expect_generations(ParentSide& side, const std::vector<std::uint64_t>& generations) {
    require_ok(side.channel.send(kRawBytes, generations.data(), generations.size() * 8, -1, kStep));
    (void)take(side.channel.receive(kDone, kStep));
}

// The exporter's side of the growth protocol, with a consumer on `device`.
void follow_growth(int device) {
    auto context = activate(0);
    const DriverSnapshot before;
    const long descriptors = open_descriptors();
    {
        GrowableBuffer buffer = shareable_buffer();
        require_ok(buffer.grow_to(2 * kChunk));
        fill_chunks(buffer, 0, 2, 1);
        RangeExporter exporter = take(RangeExporter::create(buffer));
        CHECK(exporter.generation() == 1);
        CHECK(exporter.chunk_count() == 2);
        ParentSide side = start_child("range-consumer", {std::to_string(device)});
        require_ok(cudyn::send_descriptor(side.channel, take(exporter.describe()), kStep));
        expect_generations(side, {1, 1});

        // Grown three times over: each update names only the new chunks.
        std::vector<std::uint64_t> generations = {1, 1};
        for (std::size_t target : {5u, 6u, 9u}) {
            const std::size_t had = buffer.chunk_count();
            require_ok(buffer.grow_to(target * kChunk));
            const std::uint64_t next = exporter.generation() + 1;
            fill_chunks(buffer, had, target, next);
            RangeDescriptor update = take(exporter.update());
            CHECK(update.generation == next);
            CHECK(update.base_generation == next - 1);
            CHECK(update.kept_chunks == had);
            CHECK(update.chunks.size() == target - had);
            CHECK(update.chunks.front().offset_bytes == had * kChunk);
            require_ok(cudyn::send_descriptor(side.channel, update, kStep));
            generations.resize(target, next);
            expect_generations(side, generations);
        }
        // The consumer's write is the exporter's byte too.
        CHECK(same_words(buffer.device_address(), 4, kReply));
        fill32(buffer.device_address(), 4, word_of(0, 1));

        // Shrunk: the update keeps 3 chunks and adds none.
        require_ok(buffer.shrink_to(3 * kChunk));
        RangeDescriptor shrink = take(exporter.update());
        CHECK(shrink.kept_chunks == 3);
        CHECK(shrink.chunks.empty());
        require_ok(cudyn::send_descriptor(side.channel, shrink, kStep));
        generations.resize(3);
        expect_generations(side, generations);

        // Released and restored: new physical chunks at the same places, so
        // the update replaces them all (the saved bytes came back).
        require_ok(buffer.release_physical(GrowableBuffer::Contents::Save));
        require_ok(buffer.restore());
        RangeDescriptor restored = take(exporter.update());
        CHECK(restored.kept_chunks == 0);
        CHECK(restored.chunks.size() == 3);
        require_ok(cudyn::send_descriptor(side.channel, restored, kStep));
        expect_generations(side, generations);

        require_ok(side.channel.close());
        CHECK(side.child.wait(kChildTimeout) == 0);
    }
    CHECK(before.live_delta() == 0);
    CHECK(open_descriptors() == descriptors);
}

}  // namespace

TEST_CASE("a GrowableBuffer's range is imported whole by another process, which follows its growth, shrink and "
          "restore",
          "[emulated][cuda11][range-share]") {
    follow_growth(0);
}

TEST_CASE("the consumer of a shared range may be on another device", "[emulated][cuda11][range-share]") {
    follow_growth(1);
}

TEST_CASE("a shared range imported and updated in place: access, base address, generations",
          "[emulated][cuda11][range-share]") {
    auto context = activate(0);
    const DriverSnapshot before;
    const long descriptors = open_descriptors();
    {
        GrowableBuffer buffer = shareable_buffer();
        require_ok(buffer.grow_to(3 * kChunk));
        fill_chunks(buffer, 0, 3, 1);
        RangeExporter exporter = take(RangeExporter::create(buffer));
        CHECK(exporter.size_bytes() == 3 * kChunk);

        // Imported here as if by another process: one reservation, every chunk.
        const DriverSnapshot calls({"cuMemSetAccess", "cuMemAddressReserve"});
        ImportedRange imported = take(cudyn::import_range(as_if_from_another(take(exporter.describe()))));
        CHECK(calls.calls_since("cuMemSetAccess") == 1);
        CHECK(calls.calls_since("cuMemAddressReserve") == 1);
        CHECK(imported.reserved_bytes() == kCapacity);
        CHECK(imported.size_bytes() == 3 * kChunk);
        CHECK(imported.generation() == 1);
        CHECK(imported.access().size() == 1);
        CHECK(imported.device_address() != buffer.device_address());
        CHECK(chunks_hold(imported.device_address(), {1, 1, 1}));
        CHECK(take(imported.device_span_as<std::uint32_t>()).size() == 3 * kChunk / 4);

        // The same range found from an address inside it, without the buffer.
        RangeExporter found = take(RangeExporter::create(buffer.device_address() + kChunk + 64));
        CHECK(found.device_address() == buffer.device_address());
        CHECK(found.reserved_bytes() == kCapacity);
        CHECK(found.chunk_count() == 3);
        RangeDescriptor found_layout = take(found.describe());
        CHECK(found_layout.alignment_bytes == kChunk);
        CHECK(found_layout.chunks.back().offset_bytes == 2 * kChunk);
        ImportedRange again = take(cudyn::import_range(as_if_from_another(take(found_layout.duplicate()))));
        CHECK(chunks_hold(again.device_address(), {1, 1, 1}));
        require_ok(again.close());

        // An update is refused where it does not follow, and leaves the import alone.
        require_ok(buffer.grow_to(4 * kChunk));
        fill_chunks(buffer, 3, 4, 2);
        RangeDescriptor update = as_if_from_another(take(exporter.update()));
        const auto forged = [&update](auto change) {
            RangeDescriptor copy = take(update.duplicate());
            change(copy);
            return copy;
        };
        const DriverSnapshot untouched({"cuMemImportFromShareableHandle", "cuMemMap", "cuMemUnmap"});
        require_error(imported.apply(forged([](RangeDescriptor& d) { d.range_id += kChunk; })),
                      ErrorCode::InvalidArgument, "for another range");
        require_error(imported.apply(forged([](RangeDescriptor& d) {
                          d.exporter = cudyn::detail::RecordAccess::exporter(d.exporter.pid() + 7, 3);
                      })),
                      ErrorCode::InvalidArgument, "for another range");
        require_error(imported.apply(forged([](RangeDescriptor& d) {
                          d.base_generation = 2;
                          d.generation = 3;
                      })),
                      ErrorCode::InvalidArgument, "an update missed in between");
        require_error(imported.apply(forged([](RangeDescriptor& d) { d.kept_chunks = 4; })),
                      ErrorCode::InvalidArgument, "keeps 4 chunks, 3 are mapped");
        require_error(imported.apply(forged([](RangeDescriptor& d) { d.kept_chunks = 2; })),
                      ErrorCode::InvalidArgument, "the kept chunks end at");
        require_error(imported.apply(forged([](RangeDescriptor& d) { d.base_generation = 0; })),
                      ErrorCode::InvalidArgument, "not an update");
        untouched.require_untouched();
        CHECK(imported.generation() == 1);
        CHECK(imported.chunk_count() == 3);

        // A refused import of the new chunk changes nothing either.
        {
            ScopedFault fault("cuMemImportFromShareableHandle:1:CUDA_ERROR_INVALID_VALUE");
            require_error(imported.apply(forged([](RangeDescriptor&) {})), ErrorCode::Driver,
                          "cuMemImportFromShareableHandle");
        }
        CHECK(imported.chunk_count() == 3);
        CHECK(imported.generation() == 1);

        const CUdeviceptr base = imported.device_address();
        require_ok(imported.apply(std::move(update)));
        CHECK(imported.device_address() == base);
        CHECK(imported.generation() == 2);
        CHECK(chunks_hold(base, {1, 1, 1, 2}));

        // A stale update (the one just applied, again) is refused.
        require_ok(buffer.grow_to(5 * kChunk));
        RangeDescriptor third = as_if_from_another(take(exporter.update()));
        RangeDescriptor stale = forged([](RangeDescriptor&) {});
        require_error(imported.apply(std::move(stale)), ErrorCode::InvalidArgument, "a stale update");
        require_ok(imported.apply(std::move(third)));
        CHECK(imported.chunk_count() == 5);
        require_ok(imported.close());
        CHECK(imported.empty());
    }
    CHECK(before.live_delta() == 0);
    CHECK(open_descriptors() == descriptors);
}

TEST_CASE("range sharing: bad descriptors and memory that cannot be shared are refused before the driver",
          "[emulated][cuda11][range-share]") {
    auto context = activate(0);
    const DriverSnapshot before;
    const long descriptors = open_descriptors();
    {
        // Memory without a shareable handle type.
        cudyn::GrowableBufferOptions options;
        options.chunk_size_bytes = kChunk;
        GrowableBuffer plain = take(GrowableBuffer::create(AllocationProperties::device(0), kCapacity, options));
        require_ok(plain.grow_to(kChunk));
        require_error(RangeExporter::create(plain), ErrorCode::NotSupported, "without a shareable handle type");
        require_error(RangeExporter::create(GrowableBuffer{}), ErrorCode::InvalidArgument, "empty");
        require_error(RangeExporter::create(CUdeviceptr{0}), ErrorCode::InvalidArgument, "null");
        require_error(RangeExporter::create(plain.device_address() + kChunk), ErrorCode::InvalidArgument,
                      "not mapped VMM memory");

        GrowableBuffer buffer = shareable_buffer();
        require_ok(buffer.grow_to(2 * kChunk));
        RangeExporter exporter = take(RangeExporter::create(buffer));
        const auto fresh = [&] { return as_if_from_another(take(exporter.describe())); };
        const long open = open_descriptors();  // the fake's memfds of the chunks among them

        const DriverSnapshot untouched({"cuMemAddressReserve", "cuMemImportFromShareableHandle", "cuMemMap"});
        const auto refused = [&](auto change, const char* why) {
            INFO(why);
            RangeDescriptor descriptor = fresh();
            change(descriptor);
            require_error(cudyn::import_range(std::move(descriptor)), ErrorCode::InvalidArgument, why);
        };
        refused([](RangeDescriptor& d) { d.reserved_bytes = 0; }, "reserved size is 0");
        refused([](RangeDescriptor& d) { d.alignment_bytes = 3 * kMiB; }, "not a power of two");
        refused([](RangeDescriptor& d) { d.generation = 0; }, "generation 0");
        refused([](RangeDescriptor& d) { d.range_id = 0; }, "names no range");
        refused([](RangeDescriptor& d) { d.chunks[1].offset_bytes = kChunk / 2; }, "without gaps or overlaps");
        refused([](RangeDescriptor& d) { d.chunks[1].offset_bytes = 4 * kChunk; }, "without gaps or overlaps");
        refused([](RangeDescriptor& d) { d.chunks[0].offset_bytes = kChunk; }, "not at 0");
        refused([](RangeDescriptor& d) { d.chunks[1].size_bytes = 0; }, "is empty");
        refused([](RangeDescriptor& d) { d.chunks[1].size_bytes = kChunk + 4096; }, "not a multiple of the alignment");
        refused([](RangeDescriptor& d) { d.chunks[1].size_bytes = ~std::uint64_t{0} - (~std::uint64_t{0} % kChunk); },
                "run past");
        refused([](RangeDescriptor& d) { d.chunks[1].size_bytes = kCapacity; }, "run past");
        refused([](RangeDescriptor& d) { d.chunks[0].location = Location::device(-1); }, "location");
        refused([](RangeDescriptor& d) { d.chunks[0].handle_type = HandleType::None; }, "neither posix_fd nor fabric");
        refused([](RangeDescriptor& d) { (void)d.chunks[1].fd.close(); }, "without its file descriptor");
        refused([](RangeDescriptor& d) { d.kept_chunks = 1; }, "keeps no chunks");
        refused([](RangeDescriptor& d) {
            d.base_generation = 1;
            d.generation = 2;
        }, "an update of generation 1");
        {
            RangeDescriptor skipping = fresh();
            skipping.base_generation = 3;
            require_error(skipping.validate(), ErrorCode::InvalidArgument, "does not follow base generation");
        }
        // This process's own export.
        require_error(cudyn::import_range(take(exporter.describe())), ErrorCode::InvalidArgument,
                      "this process exported the range");
        untouched.require_untouched();
        CHECK(open_descriptors() == open);  // refused descriptors closed their fds

        // Grants the chunks' memory cannot take: NotSupported naming the pair.
        {
            ScopedFault fault("cuDeviceCanAccessPeer:1+:CUDA_ERROR_INVALID_DEVICE");
            CHECK_FALSE(cudyn::import_range(fresh(), {{Location::device(1), AccessFlags::ReadWrite}}).has_value());
        }
        untouched.require_untouched();

        // describe() after the range changed says so.
        require_ok(buffer.shrink_to(kChunk));
        require_error(exporter.describe(), ErrorCode::InvalidArgument, "the range changed");
    }
    CHECK(before.live_delta() == 0);
    CHECK(open_descriptors() == descriptors);
}

TEST_CASE("range sharing: a failure half-way through an import, an update or an export leaves nothing behind",
          "[emulated][cuda11][range-share]") {
    auto context = activate(0);
    const DriverSnapshot before;
    const long descriptors = open_descriptors();
    {
        GrowableBuffer buffer = shareable_buffer();
        require_ok(buffer.grow_to(3 * kChunk));
        RangeExporter exporter = take(RangeExporter::create(buffer));
        for (const char* step : {"cuMemImportFromShareableHandle:3", "cuMemAddressReserve:1", "cuMemMap:2",
                                 "cuMemSetAccess:1"}) {
            INFO(step);
            RangeDescriptor descriptor = as_if_from_another(take(exporter.describe()));
            const long live = FakeDriver::loaded().live_allocations();
            const long open = open_descriptors();
            {
                ScopedFault fault(step);
                CHECK_FALSE(cudyn::import_range(std::move(descriptor)).has_value());
            }
            CHECK(FakeDriver::loaded().live_allocations() == live);
            CHECK(open_descriptors() == open - 3);  // the descriptor's own fds were consumed
        }

        // An update whose mapping fails after the unmap: the kept chunks stay.
        ImportedRange imported = take(cudyn::import_range(as_if_from_another(take(exporter.describe()))));
        require_ok(buffer.release_physical());
        require_ok(buffer.restore());
        RangeDescriptor replaced = as_if_from_another(take(exporter.update()));
        CHECK(replaced.kept_chunks == 0);
        {
            ScopedFault fault("cuMemMap:2");
            CHECK_FALSE(imported.apply(std::move(replaced)).has_value());
        }
        CHECK(imported.chunk_count() == 0);
        CHECK(imported.generation() == 1);
        require_ok(imported.close());

        // An export refused half-way: the exporter stays at its generation, and a retry works.
        require_ok(buffer.grow_to(5 * kChunk));
        {
            ScopedFault fault("cuMemExportToShareableHandle:2");
            CHECK_FALSE(exporter.update().has_value());
        }
        CHECK(exporter.generation() == 2);
        RangeDescriptor retried = take(exporter.update());
        CHECK(retried.generation == 3);
        CHECK(retried.kept_chunks == 3);
        CHECK(retried.chunks.size() == 2);
    }
    CHECK(before.live_delta() == 0);
    CHECK(open_descriptors() == descriptors);
}

TEST_CASE("a range of more chunks than one message carries travels as several, received as one",
          "[emulated][cuda11][range-share]") {
    const long descriptors = open_descriptors();
    {
        constexpr std::size_t kMany = FdChannel::kMaxDescriptors + 47;
        RangeDescriptor many;
        many.exporter = cudyn::detail::RecordAccess::exporter(12345, 678);
        many.range_id = 0x7f0000000000;
        many.reserved_bytes = kMany * kChunk;
        many.alignment_bytes = kChunk;
        many.generation = 1;
        FileDescriptor null_device(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        for (std::size_t i = 0; i < kMany; ++i) {
            RangeChunk chunk;
            chunk.offset_bytes = i * kChunk;
            chunk.size_bytes = kChunk;
            chunk.location = Location::device(static_cast<int>(i % 2));
            chunk.handle_type = HandleType::PosixFileDescriptor;
            chunk.fd = take(null_device.duplicate());
            many.chunks.push_back(std::move(chunk));
        }
        auto ends = take(FdChannel::pair());
        require_ok(cudyn::send_descriptor(ends.first, many));
        RangeDescriptor received = take(cudyn::receive_range(ends.second));
        REQUIRE(received.chunks.size() == kMany);
        CHECK(received.exporter == many.exporter);
        CHECK(received.chunks.back().offset_bytes == (kMany - 1) * kChunk);
        CHECK(received.chunks[1].location == Location::device(1));
        for (const RangeChunk& chunk : received.chunks) CHECK(::fcntl(chunk.fd.get(), F_GETFD) >= 0);

        // The channel itself: up to kMaxDescriptors in one message, in order.
        std::vector<int> fds(FdChannel::kMaxDescriptors, null_device.get());
        require_ok(ends.first.send_with_descriptors(7, nullptr, 0, fds));
        auto message = take(ends.second.receive(7));
        CHECK(message.descriptors.size() == FdChannel::kMaxDescriptors);
        CHECK_FALSE(message.fd.valid());
        fds.push_back(null_device.get());
        require_error(ends.first.send_with_descriptors(7, nullptr, 0, fds), ErrorCode::InvalidArgument,
                      "more than the 253");
        require_error(ends.first.send_with_descriptors(7, nullptr, 0, {-1}), ErrorCode::InvalidArgument,
                      "not an open descriptor");

        // A message of the range cut short: the receiver gets nothing, and nothing stays open.
        require_ok(cudyn::send_descriptor(ends.first, many));
        // The first message read on its own: the next one starts half-way.
        auto opening = take(ends.second.receive(cudyn::kRangeMessageTag));
        CHECK(opening.descriptors.size() == FdChannel::kMaxDescriptors);
        require_error(cudyn::receive_range(ends.second), ErrorCode::InvalidArgument, "chunks 253");
    }
    CHECK(open_descriptors() == descriptors);
}

namespace {

// A range of `count` 2 MiB POSIX chunks over /dev/null, an 8-chunk reservation.
RangeDescriptor null_range(std::size_t count) {
    RangeDescriptor range;
    range.exporter = cudyn::detail::RecordAccess::exporter(12345, 678);
    range.range_id = 0x7f0000000000;
    range.reserved_bytes = 8 * kChunk;
    range.alignment_bytes = kChunk;
    range.generation = 1;
    FileDescriptor null_device(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    for (std::size_t i = 0; i < count; ++i) {
        RangeChunk chunk;
        chunk.offset_bytes = i * kChunk;
        chunk.size_bytes = kChunk;
        chunk.location = Location::device(0);
        chunk.handle_type = HandleType::PosixFileDescriptor;
        chunk.fd = take(null_device.duplicate());
        range.chunks.push_back(std::move(chunk));
    }
    return range;
}

void put_u32(std::vector<std::uint8_t>& bytes, std::size_t at, std::uint32_t value) {
    for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<std::uint8_t>(value >> (8 * i));
}
void put_u64(std::vector<std::uint8_t>& bytes, std::size_t at, std::uint64_t value) {
    for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<std::uint8_t>(value >> (8 * i));
}

// Where the fields sit in a range message (src/share/range_message.cpp's
// layouts): the 104-byte range record, then 112 bytes per chunk.
constexpr std::size_t kRangeRecordBytes = 104;
constexpr std::size_t kTotalChunksAt = 80;
constexpr std::size_t kChunkRecordBytes = 112;
constexpr std::size_t kHandleTypeAt = 36;  // within a chunk record
constexpr std::size_t kLocationIdAt = 40;

}  // namespace

TEST_CASE("describe() after a growth without update() is the published generation, which a late importer "
          "follows with the next update()",
          "[emulated][cuda11][range-share]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        GrowableBuffer buffer = shareable_buffer();
        require_ok(buffer.grow_to(2 * kChunk));
        RangeExporter exporter = take(RangeExporter::create(buffer));
        require_ok(buffer.grow_to(3 * kChunk));
        // Still generation 1, its two chunks: the third comes with update().
        RangeDescriptor late = take(exporter.describe());
        CHECK(late.generation == 1);
        CHECK(late.chunks.size() == 2);
        CHECK(exporter.generation() == 1);
        ImportedRange imported = take(cudyn::import_range(as_if_from_another(std::move(late))));
        CHECK(imported.size_bytes() == 2 * kChunk);
        RangeDescriptor update = take(exporter.update());
        CHECK(update.generation == 2);
        CHECK(update.kept_chunks == 2);
        require_ok(imported.apply(as_if_from_another(std::move(update))));
        CHECK(imported.size_bytes() == 3 * kChunk);
        // A published chunk no longer mapped cannot be described.
        require_ok(buffer.shrink_to(kChunk));
        require_error(exporter.describe(), ErrorCode::InvalidArgument, "the range changed since it was published");
        require_ok(imported.close());
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("receive_range refuses what a message cannot mean at once: a location id past an int, a fabric chunk "
          "without a handle, more chunks than the reservation holds",
          "[emulated][cuda11][range-share]") {
    const long descriptors = open_descriptors();
    {
        // One chunk's message as send_descriptor writes it, changed, sent as it is.
        const auto message_of = [](const RangeDescriptor& range) {
            auto ends = take(FdChannel::pair());
            require_ok(cudyn::send_descriptor(ends.first, range));
            return take(ends.second.receive(cudyn::kRangeMessageTag));
        };
        const auto received = [](const std::vector<std::uint8_t>& payload, const std::vector<int>& fds) {
            auto ends = take(FdChannel::pair());
            require_ok(ends.first.send_with_descriptors(cudyn::kRangeMessageTag, payload.data(), payload.size(), fds));
            // A short wait: a refusal must come now, not as a timeout.
            return cudyn::receive_range(ends.second, std::chrono::milliseconds(200));
        };
        const RangeDescriptor one = null_range(1);
        auto sent = message_of(one);
        const std::vector<int> fds{sent.descriptors.at(0).get()};
        REQUIRE(sent.payload.size() == kRangeRecordBytes + kChunkRecordBytes);
        REQUIRE(received(sent.payload, fds).has_value());  // unchanged, it is read

        // Device 2^40 was read as device 0.
        auto far = sent.payload;
        put_u64(far, kRangeRecordBytes + kLocationIdAt, std::uint64_t{1} << 40);
        require_error(received(far, fds), ErrorCode::InvalidArgument, "chunk 0 names location id 1099511627776");
        put_u64(far, kRangeRecordBytes + kLocationIdAt, static_cast<std::uint64_t>(-(std::int64_t{1} << 33)));
        require_error(received(far, fds), ErrorCode::InvalidArgument, "no device or NUMA node has");

        // A fabric chunk whose handle is all zero: refused by the reader, and by validate().
        auto zero_fabric = sent.payload;
        put_u32(zero_fabric, kRangeRecordBytes + kHandleTypeAt, static_cast<std::uint32_t>(HandleType::Fabric));
        require_error(received(zero_fabric, {}), ErrorCode::InvalidArgument,
                      "receive_range: chunk 0 is a fabric chunk whose handle is all zero");
        RangeDescriptor fabric = null_range(1);
        (void)fabric.chunks[0].fd.close();
        fabric.chunks[0].handle_type = HandleType::Fabric;
        require_error(fabric.validate(), ErrorCode::InvalidArgument,
                      "RangeDescriptor: chunk 0 is a fabric chunk whose handle is all zero");
        {
            // import_range asks the driver nothing for it.
            auto context = activate(0);
            const DriverSnapshot untouched({"cuMemAddressReserve", "cuMemImportFromShareableHandle", "cuMemMap"});
            require_error(cudyn::import_range(std::move(fabric)), ErrorCode::InvalidArgument, "all zero");
            untouched.require_untouched();
        }

        // 2^40 chunks announced for an 8-chunk reservation: InvalidArgument, not the timeout.
        auto impossible = sent.payload;
        put_u64(impossible, kTotalChunksAt, std::uint64_t{1} << 40);
        require_error(received(impossible, fds), ErrorCode::InvalidArgument,
                      "announces 1099511627776 chunks after 0 kept, more than the 8");
        put_u64(impossible, kTotalChunksAt, 9);
        require_error(received(impossible, fds), ErrorCode::InvalidArgument, "more than the 8");
    }
    CHECK(open_descriptors() == descriptors);
}

TEST_CASE("range sharing needs VMM: NotSupported on a driver without it", "[legacy][range-share]") {
    auto context = activate(0);
    cudyn::GrowableBufferOptions options;
    options.chunk_size_bytes = kChunk;
    require_error(GrowableBuffer::create(AllocationProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor),
                                         kCapacity, options),
                  ErrorCode::NotSupported, "");
    require_error(RangeExporter::create(CUdeviceptr{0x1000}), ErrorCode::InvalidArgument, "not mapped VMM memory");
}
