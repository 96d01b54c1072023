// cudyn — private to allocation sharing: each kind's parts (the
// detail::*Parts of allocation_sharing.hpp) written into a channel message,
// read back from one, and imported. A kind is its parts type, an alternative
// of detail::AllocationParts, and these three functions
// (allocation_parts.cpp); the message (allocation_message.cpp) and the
// import (allocation_import.cpp) reach them with std::visit.
#pragma once

#include "cudyn/channel/file_descriptor.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/share/allocation_sharing.hpp"

#include "core/internal.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cudyn::detail {

inline constexpr Operation kReceiveAllocation{"receive_allocation"};

// What every message says before its parts, which the parts must agree with.
struct AllocationRecord {
    static constexpr std::size_t kSerializedSize = 64;
    std::uint32_t kind = 0;
    std::uint32_t handle_type = 0;
    ExporterIdentity exporter;
    std::uint64_t allocation_size = 0;
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
};

// A message's payload after its AllocationRecord, and its file descriptor.
class PartsWriter {
public:
    explicit PartsWriter(std::vector<std::uint8_t>& payload) noexcept : payload_(payload) {}
    template <typename Record>
    void record(const Record& record) {
        const auto bytes = record.to_bytes();
        payload_.insert(payload_.end(), bytes.begin(), bytes.end());
    }
    void file_descriptor(const FileDescriptor& fd) noexcept { fd_ = fd.get(); }
    int file_descriptor() const noexcept { return fd_; }

private:
    std::vector<std::uint8_t>& payload_;
    int fd_ = -1;
};

// Reads the parts of a message whose AllocationRecord was `record`: each
// record in turn, the file descriptor where the kind has one, and the checks
// that the parts agree with the record.
class PartsReader {
public:
    PartsReader(const std::uint8_t* data, std::size_t size, FileDescriptor fd, const AllocationRecord& record) noexcept
        : data_(data), size_(size), fd_(std::move(fd)), record_(record) {}

    // The next Record::kSerializedSize bytes, parsed (Record::from_bytes).
    template <typename Record>
    Result<Record> record(const char* name) {
        if (size_ - at_ < Record::kSerializedSize)
            return kReceiveAllocation.invalid("the message ends inside its " + std::string(name) + " (" +
                                              std::to_string(size_ - at_) + " bytes left, the record takes " +
                                              std::to_string(Record::kSerializedSize) + ")");
        const std::uint8_t* at = data_ + at_;
        at_ += Record::kSerializedSize;
        return Record::from_bytes(at, Record::kSerializedSize);
    }
    // The file descriptor the message carried (InvalidArgument when none).
    Result<FileDescriptor> file_descriptor();
    // InvalidArgument unless a part's view of the shared part, or of its
    // exporter, is the record's.
    Result<void> agree(const char* part, std::uint64_t offset, std::uint64_t size, std::uint64_t allocation) const;
    Result<void> same_exporter(const char* part, std::uint64_t pid, std::uint64_t token) const;
    const AllocationRecord& message_record() const noexcept { return record_; }

    // After the parts: InvalidArgument for bytes or a file descriptor left
    // over. `kind` names the parts read.
    Result<void> finish(const std::string& kind) const;

private:
    const std::uint8_t* data_;
    std::size_t size_;
    std::size_t at_ = 0;
    FileDescriptor fd_;
    const AllocationRecord& record_;
};

// ---- each kind --------------------------------------------------------------------------------------
//
// write_parts: the kind's records (and file descriptor) into the message.
// read_parts:  the same back, checked against the message's record.
// import_parts: the kind's import in the current context; `descriptor` is
//               left as it was (a file descriptor is duplicated).

void write_parts(const LegacyIpcParts& parts, PartsWriter& out);
void write_parts(const VmmFdParts& parts, PartsWriter& out);
void write_parts(const VmmFabricParts& parts, PartsWriter& out);
void write_parts(const PoolFdParts& parts, PartsWriter& out);
void write_parts(const PoolFabricParts& parts, PartsWriter& out);

Result<LegacyIpcParts> read_parts(std::in_place_type_t<LegacyIpcParts>, PartsReader& in);
Result<VmmFdParts> read_parts(std::in_place_type_t<VmmFdParts>, PartsReader& in);
Result<VmmFabricParts> read_parts(std::in_place_type_t<VmmFabricParts>, PartsReader& in);
Result<PoolFdParts> read_parts(std::in_place_type_t<PoolFdParts>, PartsReader& in);
Result<PoolFabricParts> read_parts(std::in_place_type_t<PoolFabricParts>, PartsReader& in);

Result<ImportedAllocation> import_parts(const LegacyIpcParts& parts, const AllocationDescriptor& descriptor);
Result<ImportedAllocation> import_parts(const VmmFdParts& parts, const AllocationDescriptor& descriptor);
Result<ImportedAllocation> import_parts(const VmmFabricParts& parts, const AllocationDescriptor& descriptor);
Result<ImportedAllocation> import_parts(const PoolFdParts& parts, const AllocationDescriptor& descriptor);
Result<ImportedAllocation> import_parts(const PoolFabricParts& parts, const AllocationDescriptor& descriptor);

}  // namespace cudyn::detail
