// cudyn — ImportTicket: an owner's line in the list of live imports
// (core/live_imports.hpp), there from import_open until the ticket closes.
//
// Internal: public only because the owners' records in the public headers
// hold one. An owner keeps it next to what it imported, so a successful
// release (which resets the record) takes the line out, and a refused one
// leaves it listed while the import is still held.
#pragma once

#include "cudyn/core/live_imports.hpp"

#include <cstdint>
#include <utility>

namespace cudyn::detail {

class ImportTicket {
public:
    ImportTicket() noexcept = default;
    ImportTicket(ImportTicket&& other) noexcept : id_(std::exchange(other.id_, 0)) {}
    ImportTicket& operator=(ImportTicket&& other) noexcept {
        if (this != &other) {
            close();
            id_ = std::exchange(other.id_, 0);
        }
        return *this;
    }
    ImportTicket(const ImportTicket&) = delete;
    ImportTicket& operator=(const ImportTicket&) = delete;
    ~ImportTicket() { close(); }

    bool listed() const noexcept { return id_ != 0; }
    // Takes the line out now (nothing when not listed).
    void close() noexcept {
        if (id_ != 0) close_listed();
    }

private:
    friend ImportTicket import_open(const LiveImport& import) noexcept;
    void close_listed() noexcept;

    std::uint64_t id_ = 0;  // 0: not listed
};

// Lists `import` until the ticket closes. Without memory for the line the
// ticket is empty and the import goes unlisted (never a failed import).
ImportTicket import_open(const LiveImport& import) noexcept;

}  // namespace cudyn::detail
