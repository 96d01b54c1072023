// cudyn — what every record that travels between processes shares: who
// exported it (ExporterIdentity), and the library's one way into a record's
// private fields (RecordAccess).
//
// Internal to the sharing records (public only because they hold an
// ExporterIdentity and befriend RecordAccess); programs read a record through
// its own accessors.
#pragma once

#include <cstdint>

namespace cudyn::detail {

// Makes blank records, reads and fills their private fields, and builds the
// owners of what was imported: the library's only door into them, defined in
// src/core/wire_format.hpp. Every record with private fields befriends it.
struct RecordAccess;

// What a record's public blank constructor takes where a Result must build
// the record in place (the driver then writes straight into the caller's
// Result): only RecordAccess makes one.
class RecordKey {
    friend struct RecordAccess;
    explicit RecordKey() = default;
};

// The process that exported a record: its pid there, and a random token drawn
// once per process, because pids repeat across PID namespaces. A process
// never imports what it exported itself (CUDA forbids it for IPC handles).
class ExporterIdentity {
public:
    ExporterIdentity() noexcept = default;  // nobody (0, 0): a record not filled yet

    std::uint64_t pid() const noexcept { return pid_; }
    std::uint64_t token() const noexcept { return token_; }
    // True in the process that exported it.
    bool is_this_process() const noexcept;

    friend bool operator==(const ExporterIdentity& a, const ExporterIdentity& b) noexcept {
        return a.pid_ == b.pid_ && a.token_ == b.token_;
    }
    friend bool operator!=(const ExporterIdentity& a, const ExporterIdentity& b) noexcept { return !(a == b); }

private:
    friend struct RecordAccess;
    std::uint64_t pid_ = 0;
    std::uint64_t token_ = 0;
};

}  // namespace cudyn::detail
