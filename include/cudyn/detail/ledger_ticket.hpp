// cudyn — LedgerTicket: an owner's entry in the memory ledger, counted in
// when made and out when destroyed or overwritten.
//
// Internal: public only because the owners' records in the public headers
// hold one. An owner keeps it in its Held record next to what it holds, so a
// successful release (which resets the record) counts the memory out, a
// refused one keeps it counted, and letting go at exit counts it out too.
#pragma once

#include "cudyn/core/memory_ledger.hpp"
#include "cudyn/detail/code_layout.hpp"
#include "cudyn/detail/ledger_row.hpp"

#include <cstddef>
#include <cstdint>
#include <utility>

namespace cudyn::detail {

class LedgerTicket;
// Counts `bytes` of `kind` on `device` (-1: none) in; the ticket counts them
// out. An empty ticket when the ledger is off.
LedgerTicket ledger_open(MemoryKind kind, int device, std::size_t bytes, std::uintptr_t address) noexcept;

class LedgerTicket {
public:
    LedgerTicket() noexcept = default;
    LedgerTicket(LedgerTicket&& other) noexcept
        : row_(std::exchange(other.row_, 0)), bytes_(other.bytes_), record_(other.record_) {}
    LedgerTicket& operator=(LedgerTicket&& other) noexcept {
        if (this != &other) {
            close();
            row_ = std::exchange(other.row_, 0);
            bytes_ = other.bytes_;
            record_ = other.record_;
        }
        return *this;
    }
    LedgerTicket(const LedgerTicket&) = delete;
    LedgerTicket& operator=(const LedgerTicket&) = delete;
    ~LedgerTicket() { close(); }

    bool counted() const noexcept { return row_ != 0; }
    // ledger_open into this ticket, which must be empty: the hot paths count
    // into their record in place, without a ticket made, moved and destroyed.
    // The common case is here, in the caller's code: the calling thread owns
    // the row (so counting, and not tracking: rows are shared while
    // tracking), and the whole entry is in the row. Everything else (the
    // first allocations, which read the environment; tracking; a shared
    // row) is open_uncommon's, out of line.
    void open(MemoryKind kind, int device, std::size_t bytes, std::uintptr_t address) noexcept {
        const std::size_t row = ledger_row_index(kind, device);
        if (CUDYN_DETAIL_UNLIKELY(!update_owned<false>(ledger_rows[row], this_thread_identity(), bytes)))
            return open_uncommon(kind, device, bytes, address);
        row_ = static_cast<std::uint32_t>(row + 1);
        bytes_ = bytes;
    }
    // Counts out now (nothing when already out); as open, the owner's
    // untracked close here, the rest out of line.
    void close() noexcept {
        if (row_ == 0) return;
        if (CUDYN_DETAIL_UNLIKELY(record_ != 0 ||
                                  !update_owned<true>(ledger_rows[row_ - 1], this_thread_identity(), bytes_)))
            return close_uncommon();
        row_ = 0;
    }

private:
    void open_uncommon(MemoryKind kind, int device, std::size_t bytes, std::uintptr_t address) noexcept;
    void close_counted() noexcept;  // close() out of line, for programs built against the 0.2.0 header
    void close_uncommon() noexcept;

    std::uint32_t row_ = 0;       // 0: not counted; else 1 + the ledger row
    std::uint64_t bytes_ = 0;
    std::uint64_t record_ = 0;    // the tracked record's id; 0: not tracked
};

}  // namespace cudyn::detail
