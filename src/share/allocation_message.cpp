// cudyn — an AllocationDescriptor as one channel message: the record every
// message starts with (kind, handle type, exporter, the shared part), then
// the kind's own records, with its file descriptor riding along.
#include "cudyn/share/allocation_sharing.hpp"

#include "core/internal.hpp"
#include "core/wire_format.hpp"
#include "share/allocation_parts.hpp"
#include "share/internal.hpp"

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace cudyn {

const char* to_string(AllocationKind kind) noexcept {
    switch (kind) {
        case AllocationKind::LegacyIpc: return "legacy_ipc";
        case AllocationKind::Vmm: return "vmm";
        case AllocationKind::Pool: return "pool";
    }
    return "unknown";
}

namespace detail {

template <>
struct WireLayout<AllocationRecord> {
    static constexpr char kMagic[9] = "CUDYNSAL";
    static constexpr const char* kName = "AllocationDescriptor";
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& record) {
        wire.u32(record.kind);
        wire.u32(record.handle_type);
        wire.exporter(record.exporter);
        wire.u64(record.allocation_size);
        wire.u64(record.offset);
        wire.u64(record.size);
    }
    static Result<void> validate(const AllocationRecord& record) {
        return check_shared_part(Operation{kName}, record.offset, record.size, record.allocation_size);
    }
};

// ---- reading a message's parts ----------------------------------------------------------------------

Result<FileDescriptor> PartsReader::file_descriptor() {
    if (!fd_) return kReceiveAllocation.invalid("the message carried no file descriptor, which this kind needs");
    return std::move(fd_);
}

Result<void> PartsReader::agree(const char* part, std::uint64_t offset, std::uint64_t size,
                                std::uint64_t allocation) const {
    if (offset == record_.offset && size == record_.size && allocation == record_.allocation_size) return ok();
    return kReceiveAllocation.invalid(std::string("the ") + part + " (offset " + std::to_string(offset) + ", size " +
                                      std::to_string(size) + ", allocation " + std::to_string(allocation) +
                                      ") disagrees with the record (offset " + std::to_string(record_.offset) +
                                      ", size " + std::to_string(record_.size) + ", allocation " +
                                      std::to_string(record_.allocation_size) + ")");
}

Result<void> PartsReader::same_exporter(const char* part, std::uint64_t pid, std::uint64_t token) const {
    if (pid == record_.exporter.pid() && token == record_.exporter.token()) return ok();
    return kReceiveAllocation.invalid(std::string("the ") + part + "'s exporter (pid " + std::to_string(pid) +
                                      ", token " + hex(token) + ") disagrees with the record's (pid " +
                                      std::to_string(record_.exporter.pid()) + ", token " +
                                      hex(record_.exporter.token()) + ")");
}

Result<void> PartsReader::finish(const std::string& kind) const {
    if (at_ != size_)
        return kReceiveAllocation.invalid(std::to_string(AllocationRecord::kSerializedSize + size_) +
                                          " bytes for a " + kind + " allocation, which takes " +
                                          std::to_string(AllocationRecord::kSerializedSize + at_));
    if (fd_) return kReceiveAllocation.invalid("the message carried a file descriptor, which this kind has none of");
    return ok();
}

}  // namespace detail

namespace {

using detail::AllocationParts;
using detail::AllocationRecord;
using detail::kReceiveAllocation;

std::string describe_kind(AllocationKind kind, HandleType type) {
    return std::string(to_string(kind)) + " (" + to_string(type) + ")";
}

// The parts the record's kind and handle type name, read from the rest of
// the message: the alternative whose kKind and kHandleType they are.
template <std::size_t I = 0>
Result<AllocationParts> read_kind(const AllocationRecord& record, detail::PartsReader& in) {
    if constexpr (I == std::variant_size_v<AllocationParts>) {
        return kReceiveAllocation.invalid("kind " + std::to_string(record.kind) + " with handle type " +
                                          std::to_string(record.handle_type) +
                                          " is not a kind of allocation this cudyn knows");
    } else {
        using Parts = std::variant_alternative_t<I, AllocationParts>;
        if (record.kind != static_cast<std::uint32_t>(Parts::kKind) ||
            record.handle_type != static_cast<std::uint32_t>(Parts::kHandleType))
            return read_kind<I + 1>(record, in);
        CUDYN_TRY_ASSIGN(Parts parts, detail::read_parts(std::in_place_type<Parts>, in));
        CUDYN_TRY(in.finish(describe_kind(Parts::kKind, Parts::kHandleType)));
        return AllocationParts(std::move(parts));
    }
}

// A message's payload and file descriptor as an AllocationDescriptor; nothing
// stays open on failure.
Result<AllocationDescriptor> parse(const std::vector<std::uint8_t>& payload, FileDescriptor fd) {
    constexpr std::size_t kRecord = AllocationRecord::kSerializedSize;
    if (payload.size() < kRecord)
        return kReceiveAllocation.invalid(std::to_string(payload.size()) + " bytes, shorter than the " +
                                          std::to_string(kRecord) + "-byte AllocationDescriptor record");
    CUDYN_TRY_ASSIGN(const AllocationRecord record, detail::parse_record<AllocationRecord>(payload.data(), kRecord));
    detail::PartsReader in(payload.data() + kRecord, payload.size() - kRecord, std::move(fd), record);
    CUDYN_TRY_ASSIGN(AllocationParts parts, read_kind(record, in));
    return detail::RecordAccess::make<AllocationDescriptor>(std::move(parts), record.exporter, record.allocation_size,
                                                            record.offset, record.size);
}

}  // namespace

Result<void> send_descriptor(FdChannel& channel, const AllocationDescriptor& descriptor,
                             std::chrono::milliseconds timeout) {
    const auto& fields = detail::RecordAccess::fields(descriptor);
    AllocationRecord record;
    record.kind = static_cast<std::uint32_t>(descriptor.kind());
    record.handle_type = static_cast<std::uint32_t>(descriptor.handle_type());
    record.exporter = fields.exporter;
    record.allocation_size = fields.allocation_size;
    record.offset = fields.offset;
    record.size = fields.size;
    const auto header = detail::write_record(record);
    std::vector<std::uint8_t> payload(header.begin(), header.end());
    detail::PartsWriter out(payload);
    std::visit([&out](const auto& parts) { detail::write_parts(parts, out); }, fields.parts);
    if (descriptor.carries_file_descriptor() && out.file_descriptor() < 0)
        return detail::Operation{"send_descriptor"}.invalid(
            "the file descriptor is closed (the AllocationDescriptor was moved from)");
    return channel.send(kAllocationMessageTag, payload.data(), payload.size(), out.file_descriptor(), timeout);
}

Result<AllocationDescriptor> receive_allocation(FdChannel& channel, std::chrono::milliseconds timeout) {
    CUDYN_TRY_ASSIGN(ChannelMessage message, channel.receive(kAllocationMessageTag, timeout));
    return parse(message.payload, std::move(message.fd));
}

}  // namespace cudyn
