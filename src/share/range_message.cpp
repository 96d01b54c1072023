// cudyn — a RangeDescriptor's checks, and the descriptor as channel messages:
// a range record, then one chunk record per chunk, each POSIX chunk's
// descriptor riding along; kMaxDescriptors chunks a message.
#include "cudyn/share/range_sharing.hpp"

#include "core/internal.hpp"
#include "core/wire_format.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace cudyn {

namespace {

constexpr detail::Operation kDescriptor{"RangeDescriptor"};
constexpr detail::Operation kReceive{"receive_range"};

bool power_of_two(std::uint64_t value) noexcept { return value != 0 && (value & (value - 1)) == 0; }

std::string chunk_name(std::size_t index) { return "chunk " + std::to_string(index); }

Result<void> check_chunk(const RangeChunk& chunk, std::size_t index, std::uint64_t expected_offset,
                         const RangeDescriptor& range) {
    const std::string name = chunk_name(index);
    if (chunk.offset_bytes != expected_offset)
        return kDescriptor.invalid(name + " starts at offset " + std::to_string(chunk.offset_bytes) + ", not at " +
                                   std::to_string(expected_offset) +
                                   " where the chunk before it ends (chunks follow each other without gaps or "
                                   "overlaps)");
    if (chunk.size_bytes == 0) return kDescriptor.invalid(name + " is empty");
    if (chunk.size_bytes % range.alignment_bytes != 0)
        return kDescriptor.invalid(name + "'s size " + std::to_string(chunk.size_bytes) +
                                   " is not a multiple of the alignment " + std::to_string(range.alignment_bytes));
    CUDYN_TRY(detail::check_inside_allocation(kDescriptor, chunk.offset_bytes, chunk.size_bytes, range.reserved_bytes));
    const std::string where = "RangeDescriptor: " + name + "'s location";
    CUDYN_TRY(chunk.location.validate(where.c_str()));
    if (chunk.location.kind() == LocationKind::HostNumaCurrent)
        return kDescriptor.invalid(name + "'s location is host NUMA current, which names no memory");
    if (chunk.handle_type == HandleType::PosixFileDescriptor) {
        if (!chunk.fd) return kDescriptor.invalid(name + " is a POSIX chunk without its file descriptor");
    } else if (chunk.handle_type == HandleType::Fabric) {
        if (chunk.fabric == FabricHandle()) return kDescriptor.invalid(name + " is a fabric chunk whose handle is all zero");
    } else {
        return kDescriptor.invalid(name + "'s handle type " + to_string(chunk.handle_type) +
                                   " is neither posix_fd nor fabric");
    }
    return ok();
}

}  // namespace

std::uint64_t RangeDescriptor::listed_bytes() const noexcept {
    std::uint64_t bytes = 0;
    for (const RangeChunk& chunk : chunks) bytes += chunk.size_bytes;
    return bytes;
}

Result<RangeChunk> RangeChunk::duplicate() const {
    RangeChunk same;
    same.offset_bytes = offset_bytes;
    same.size_bytes = size_bytes;
    same.location = location;
    same.handle_type = handle_type;
    same.fabric = fabric;
    if (fd) {
        CUDYN_TRY_ASSIGN(same.fd, fd.duplicate());
    }
    return same;
}

Result<RangeDescriptor> RangeDescriptor::duplicate() const {
    RangeDescriptor copy;
    copy.exporter = exporter;
    copy.range_id = range_id;
    copy.reserved_bytes = reserved_bytes;
    copy.alignment_bytes = alignment_bytes;
    copy.generation = generation;
    copy.base_generation = base_generation;
    copy.kept_chunks = kept_chunks;
    copy.chunks.reserve(chunks.size());
    for (const RangeChunk& chunk : chunks) {
        CUDYN_TRY_ASSIGN(RangeChunk same, chunk.duplicate());
        copy.chunks.push_back(std::move(same));
    }
    return copy;
}

Result<void> RangeDescriptor::validate() const {
    if (exporter.pid() == 0 || exporter.token() == 0) return kDescriptor.invalid("it names no exporter");
    if (range_id == 0) return kDescriptor.invalid("it names no range (range id 0)");
    if (reserved_bytes == 0) return kDescriptor.invalid("the reserved size is 0");
    if (!power_of_two(alignment_bytes))
        return kDescriptor.invalid("the alignment " + std::to_string(alignment_bytes) + " is not a power of two");
    if (reserved_bytes % alignment_bytes != 0)
        return kDescriptor.invalid("the reserved size " + std::to_string(reserved_bytes) +
                                   " is not a multiple of the alignment " + std::to_string(alignment_bytes));
    if (generation == 0) return kDescriptor.invalid("generation 0 (the first is 1)");
    if (is_update() && generation != base_generation + 1)
        return kDescriptor.invalid("generation " + std::to_string(generation) + " does not follow base generation " +
                                   std::to_string(base_generation));
    if (!is_update() && kept_chunks != 0)
        return kDescriptor.invalid("a whole layout keeps no chunks (kept " + std::to_string(kept_chunks) + ")");
    // An update's first chunk follows the kept ones, whose end the importer
    // knows: it is checked there; the rest follow each other here.
    std::uint64_t expected = chunks.empty() ? 0 : chunks.front().offset_bytes;
    if (!is_update() && expected != 0)
        return kDescriptor.invalid("chunk 0 starts at offset " + std::to_string(expected) +
                                   ", not at 0: a range shares its mapped prefix");
    if (expected % alignment_bytes != 0)
        return kDescriptor.invalid("chunk 0's offset " + std::to_string(expected) +
                                   " is not a multiple of the alignment " + std::to_string(alignment_bytes));
    for (std::size_t i = 0; i < chunks.size(); ++i) {
        CUDYN_TRY(check_chunk(chunks[i], i, expected, *this));
        expected += chunks[i].size_bytes;
    }
    return ok();
}

// ---- the wire ------------------------------------------------------------------------------------

namespace detail {

// What every message of a range starts with: the descriptor's fields, how
// many chunks it has in all, and which of them this message carries.
struct RangeRecord {
    static constexpr std::size_t kSerializedSize = 104;
    ExporterIdentity exporter;
    std::uint64_t range_id = 0;
    std::uint64_t reserved_bytes = 0;
    std::uint64_t alignment_bytes = 0;
    std::uint64_t generation = 0;
    std::uint64_t base_generation = 0;
    std::uint64_t kept_chunks = 0;
    std::uint64_t total_chunks = 0;  // in the whole descriptor
    std::uint64_t first_chunk = 0;   // the index of this message's first chunk
    std::uint32_t chunk_count = 0;   // in this message
};

struct ChunkRecord {
    static constexpr std::size_t kSerializedSize = 112;
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
    std::uint32_t location_kind = 0;
    std::int64_t location_id = 0;
    std::uint32_t handle_type = 0;
    FabricHandle fabric;
};

template <>
struct WireLayout<RangeRecord> {
    static constexpr char kMagic[9] = "CUDYNRNG";
    static constexpr const char* kName = "RangeDescriptor";
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& record) {
        wire.exporter(record.exporter);
        wire.u64(record.range_id);
        wire.u64(record.reserved_bytes);
        wire.u64(record.alignment_bytes);
        wire.u64(record.generation);
        wire.u64(record.base_generation);
        wire.u64(record.kept_chunks);
        wire.u64(record.total_chunks);
        wire.u64(record.first_chunk);
        wire.u32(record.chunk_count);
        wire.reserved(4);
    }
};

template <>
struct WireLayout<ChunkRecord> {
    static constexpr char kMagic[9] = "CUDYNRCH";
    static constexpr const char* kName = "RangeChunk";
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& record) {
        wire.u64(record.offset);
        wire.u64(record.size);
        wire.u32(record.location_kind);
        wire.u32(record.handle_type);
        wire.u64(record.location_id);
        wire.fixed(record.fabric);
    }
};

}  // namespace detail

namespace {

using detail::ChunkRecord;
using detail::RangeRecord;

constexpr std::size_t kChunksPerMessage = FdChannel::kMaxDescriptors;
static_assert(RangeRecord::kSerializedSize + kChunksPerMessage * ChunkRecord::kSerializedSize <= FdChannel::kMaxPayload,
              "a message of chunks fits one channel payload");

ChunkRecord chunk_record(const RangeChunk& chunk) {
    ChunkRecord record;
    record.offset = chunk.offset_bytes;
    record.size = chunk.size_bytes;
    record.location_kind = static_cast<std::uint32_t>(chunk.location.kind());
    record.location_id = chunk.location.id();
    record.handle_type = static_cast<std::uint32_t>(chunk.handle_type);
    if (chunk.handle_type == HandleType::Fabric) record.fabric = chunk.fabric;
    return record;
}

Result<Location> location_of(const ChunkRecord& record, std::size_t index) {
    // A Location's id is an int (a device ordinal, a NUMA node): a wider one
    // is refused, not cut to another device.
    if (record.location_id < std::numeric_limits<int>::min() || record.location_id > std::numeric_limits<int>::max())
        return kReceive.invalid(chunk_name(index) + " names location id " + std::to_string(record.location_id) +
                                ", which no device or NUMA node has");
    const auto id = static_cast<int>(record.location_id);
    switch (record.location_kind) {
        case static_cast<std::uint32_t>(LocationKind::Device): return Location::device(id);
        case static_cast<std::uint32_t>(LocationKind::Host): return Location::host();
        case static_cast<std::uint32_t>(LocationKind::HostNuma): return Location::host_numa(id);
        default:
            return kReceive.invalid(chunk_name(index) + " names location kind " +
                                    std::to_string(record.location_kind) + ", which this cudyn does not know");
    }
}

// Every chunk is a non-empty multiple of the alignment inside the
// reservation, so a range holds at most reserved / alignment of them, kept
// ones included: a count beyond that is refused from the first message,
// rather than waited for message by message until the timeout.
Result<void> check_chunk_count(const RangeRecord& record) {
    if (!power_of_two(record.alignment_bytes))
        return kReceive.invalid("the alignment " + std::to_string(record.alignment_bytes) + " is not a power of two");
    const std::uint64_t most = record.reserved_bytes / record.alignment_bytes;
    if (record.kept_chunks > most || record.total_chunks > most - record.kept_chunks)
        return kReceive.invalid("the range announces " + std::to_string(record.total_chunks) + " chunks after " +
                                std::to_string(record.kept_chunks) + " kept, more than the " + std::to_string(most) +
                                " that a reservation of " + std::to_string(record.reserved_bytes) +
                                " bytes aligned to " + std::to_string(record.alignment_bytes) + " can hold");
    return ok();
}

// The fields every message of one descriptor repeats.
bool same_range(const RangeRecord& a, const RangeRecord& b) noexcept {
    return a.exporter == b.exporter && a.range_id == b.range_id && a.reserved_bytes == b.reserved_bytes &&
           a.alignment_bytes == b.alignment_bytes && a.generation == b.generation &&
           a.base_generation == b.base_generation && a.kept_chunks == b.kept_chunks &&
           a.total_chunks == b.total_chunks;
}

// One message's chunks appended to `out`, each POSIX chunk taking the next
// of `descriptors` (all of which must be used).
Result<void> read_chunks(const std::vector<std::uint8_t>& payload, const RangeRecord& record,
                         std::vector<FileDescriptor> descriptors, std::vector<RangeChunk>& out) {
    const std::size_t expected = RangeRecord::kSerializedSize + record.chunk_count * ChunkRecord::kSerializedSize;
    if (payload.size() != expected)
        return kReceive.invalid(std::to_string(payload.size()) + " bytes for " + std::to_string(record.chunk_count) +
                                " chunks, which take " + std::to_string(expected));
    std::size_t next_fd = 0;
    for (std::uint32_t i = 0; i < record.chunk_count; ++i) {
        const std::size_t index = record.first_chunk + i;
        ChunkRecord chunk_record;
        CUDYN_TRY(detail::read_record(payload.data() + RangeRecord::kSerializedSize + i * ChunkRecord::kSerializedSize,
                                      ChunkRecord::kSerializedSize, chunk_record));
        CUDYN_TRY_ASSIGN(const Location location, location_of(chunk_record, index));
        RangeChunk chunk;
        chunk.offset_bytes = chunk_record.offset;
        chunk.size_bytes = chunk_record.size;
        chunk.location = location;
        chunk.handle_type = static_cast<HandleType>(chunk_record.handle_type);
        if (chunk.handle_type == HandleType::PosixFileDescriptor) {
            if (next_fd == descriptors.size())
                return kReceive.invalid(chunk_name(index) + " is a POSIX chunk, and its message carried no "
                                                            "descriptor for it");
            chunk.fd = std::move(descriptors[next_fd++]);
        } else {
            if (chunk.handle_type == HandleType::Fabric && chunk_record.fabric == FabricHandle())
                return kReceive.invalid(chunk_name(index) + " is a fabric chunk whose handle is all zero");
            chunk.fabric = chunk_record.fabric;
        }
        out.push_back(std::move(chunk));
    }
    if (next_fd != descriptors.size())
        return kReceive.invalid("a message carried " + std::to_string(descriptors.size()) + " descriptors for " +
                                std::to_string(next_fd) + " POSIX chunks");
    return ok();
}

}  // namespace

Result<void> send_descriptor(FdChannel& channel, const RangeDescriptor& descriptor, std::chrono::milliseconds timeout) {
    CUDYN_TRY(descriptor.validate());
    RangeRecord record;
    record.exporter = descriptor.exporter;
    record.range_id = descriptor.range_id;
    record.reserved_bytes = descriptor.reserved_bytes;
    record.alignment_bytes = descriptor.alignment_bytes;
    record.generation = descriptor.generation;
    record.base_generation = descriptor.base_generation;
    record.kept_chunks = descriptor.kept_chunks;
    record.total_chunks = descriptor.chunks.size();
    std::size_t first = 0;
    do {
        const std::size_t count = std::min(kChunksPerMessage, descriptor.chunks.size() - first);
        record.first_chunk = first;
        record.chunk_count = static_cast<std::uint32_t>(count);
        const auto header = detail::write_record(record);
        std::vector<std::uint8_t> payload(header.begin(), header.end());
        std::vector<int> fds;
        for (std::size_t i = first; i < first + count; ++i) {
            const RangeChunk& chunk = descriptor.chunks[i];
            const auto bytes = detail::write_record(chunk_record(chunk));
            payload.insert(payload.end(), bytes.begin(), bytes.end());
            if (chunk.handle_type == HandleType::PosixFileDescriptor) fds.push_back(chunk.fd.get());
        }
        CUDYN_TRY(channel.send_with_descriptors(kRangeMessageTag, payload.data(), payload.size(), fds, timeout));
        first += count;
    } while (first < descriptor.chunks.size());
    return ok();
}

Result<RangeDescriptor> receive_range(FdChannel& channel, std::chrono::milliseconds timeout) {
    RangeDescriptor descriptor;  // closes what came when a later message fails
    RangeRecord first;
    for (;;) {
        CUDYN_TRY_ASSIGN(ChannelMessage message, channel.receive(kRangeMessageTag, timeout));
        if (message.fd) return kReceive.invalid("a message carried a single descriptor, not a list");
        RangeRecord record;
        if (message.payload.size() < RangeRecord::kSerializedSize)
            return kReceive.invalid(std::to_string(message.payload.size()) + " bytes, shorter than the " +
                                    std::to_string(RangeRecord::kSerializedSize) + "-byte range record");
        CUDYN_TRY(detail::read_record(message.payload.data(), RangeRecord::kSerializedSize, record));
        const bool opening = descriptor.chunks.empty() && descriptor.generation == 0;
        if (opening) {
            first = record;
            descriptor.exporter = record.exporter;
            descriptor.range_id = record.range_id;
            descriptor.reserved_bytes = record.reserved_bytes;
            descriptor.alignment_bytes = record.alignment_bytes;
            descriptor.generation = record.generation;
            descriptor.base_generation = record.base_generation;
            descriptor.kept_chunks = record.kept_chunks;
            if (record.generation == 0) return kReceive.invalid("generation 0 (the first is 1)");
            CUDYN_TRY(check_chunk_count(record));
        } else if (!same_range(first, record)) {
            return kReceive.invalid("a message of the range disagrees with its first message");
        }
        if (record.first_chunk != descriptor.chunks.size() ||
            record.chunk_count > record.total_chunks - std::min(record.total_chunks, record.first_chunk) ||
            record.chunk_count > kChunksPerMessage || (record.chunk_count == 0 && record.total_chunks != 0))
            return kReceive.invalid("a message carries chunks " + std::to_string(record.first_chunk) + " to " +
                                    std::to_string(record.first_chunk + record.chunk_count) + " of " +
                                    std::to_string(record.total_chunks) + " after " +
                                    std::to_string(descriptor.chunks.size()) + " came");
        CUDYN_TRY(read_chunks(message.payload, record, std::move(message.descriptors), descriptor.chunks));
        if (descriptor.chunks.size() == record.total_chunks) break;
    }
    CUDYN_TRY(descriptor.validate());
    return descriptor;
}

}  // namespace cudyn
