// cudyn — LedgerRow: one row of the memory ledger (a kind on a device), and
// the update that the thread owning the row makes in it.
//
// Internal: public only because LedgerTicket's open and close, inline in
// the owners' code, make that update themselves. The common entry is then a
// few instructions beside the caller's, not a call into the library, whose
// code lines (fetched again after every driver call has emptied the caches)
// cost more than the update. The row's layout, ledger_device_slots and the
// rows' order are part of the ABI: a new memory kind takes rows at the end.
#pragma once

#include "cudyn/core/memory_ledger.hpp"
#include "cudyn/detail/code_layout.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace cudyn::detail {

// Who may update a row, in LedgerRow::owner: nobody yet (unowned), a
// thread revoking the owner's right (revoking), every thread with locked
// instructions (shared), or else the one thread whose identity it holds.
constexpr std::uintptr_t ledger_row_unowned = 0;
constexpr std::uintptr_t ledger_row_revoking = 1;
constexpr std::uintptr_t ledger_row_shared = 2;
// this_thread_identity() where a thread has none: never an owner.
constexpr std::uintptr_t ledger_no_identity = 3;

// What needs the process-wide value: the peak is the highest live_bytes ever
// seen, so every open and close updates the one live_bytes of its row. The
// protocol (the window, the revoke) is described in the library's ledger.
struct alignas(64) LedgerRow {
    std::atomic<std::uintptr_t> owner{ledger_row_unowned};
    std::atomic<std::uint32_t> busy{0};  // 1 while the owner's window is open
    std::atomic<std::uint64_t> live_bytes{0};
    std::atomic<std::uint64_t> peak_bytes{0};
    // The owner's opens and closes; kept, and summed, once the row is shared.
    std::atomic<std::uint64_t> owner_opens{0};
    std::atomic<std::uint64_t> owner_closes{0};
};

// Rows: kind * ledger_device_slots + slot; slot 0 for "no device", 1..64 for
// ordinals 0..63 (a higher ordinal counts as no device).
constexpr std::size_t ledger_device_slots = 65;
constexpr std::size_t ledger_row_count = memory_kind_count * ledger_device_slots;

inline std::size_t ledger_row_index(MemoryKind kind, int device) noexcept {
    const std::size_t slot = device >= 0 && static_cast<std::size_t>(device) < ledger_device_slots - 1
                                 ? static_cast<std::size_t>(device) + 1
                                 : 0;
    return static_cast<std::size_t>(kind) * ledger_device_slots + slot;
}

// The library's ledger_row_count rows. A pointer, not the array: a program
// then holds no copy of the array (as the linker makes for a variable an
// executable reads), so the rows may grow at the end without it.
extern LedgerRow* const ledger_rows;

// The calling thread's identity, unique among the process's running threads:
// its thread pointer (the TLS ABI keeps the thread control block's own
// address at its start). A thread that ends leaves its pointer to a later
// thread, which then owns its rows: never two running threads at once.
inline std::uintptr_t this_thread_identity() noexcept {
#if defined(__linux__) && defined(__x86_64__)
    std::uintptr_t self;
    __asm__("mov %%fs:0, %0" : "=r"(self));
    return self;
#elif defined(__linux__) && defined(__aarch64__)
    std::uintptr_t self;
    __asm__("mrs %0, tpidr_el0" : "=r"(self));
    return self;
#else
    return ledger_no_identity;
#endif
}

// The order a count is stored with. Closes are released, and a snapshot
// reads them first with acquire: a close it sees brings the open before it
// along (the ticket went from the opening thread to the closing one), so a
// live count never reads below zero. A constant: given at run time, a
// compiler may store seq_cst (a locked exchange).
template <bool Close>
constexpr std::memory_order ledger_count_order = Close ? std::memory_order_release : std::memory_order_relaxed;

// The row's owner adds `bytes` to its live bytes (or takes them away, Close)
// and counts the open (or close), with plain loads and stores; false,
// nothing changed, when the row is not (or no longer) `own`'s. The window
// is busy = 1: a revoking thread marks the row first, then fences every
// thread, so either it sees this window open and waits for it, or this load
// of the owner sees the mark. Only the compiler is kept from reordering the
// two here: the revoke's fence is this side's too. Only the owner's thread
// may write busy (another's busy = 0 could hide the owner's open window),
// hence the first load.
template <bool Close>
inline bool update_owned(LedgerRow& row, std::uintptr_t own, std::uint64_t bytes) noexcept {
    if (CUDYN_DETAIL_UNLIKELY(row.owner.load(std::memory_order_relaxed) != own)) return false;
    row.busy.store(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (CUDYN_DETAIL_UNLIKELY(row.owner.load(std::memory_order_relaxed) != own)) {
        row.busy.store(0, std::memory_order_relaxed);
        return false;
    }
    const std::uint64_t before = row.live_bytes.load(std::memory_order_relaxed);
    const std::uint64_t live = Close ? before - bytes : before + bytes;
    row.live_bytes.store(live, std::memory_order_relaxed);
    if (!Close && CUDYN_DETAIL_UNLIKELY(live > row.peak_bytes.load(std::memory_order_relaxed)))
        row.peak_bytes.store(live, std::memory_order_relaxed);
    std::atomic<std::uint64_t>& counter = Close ? row.owner_closes : row.owner_opens;
    counter.store(counter.load(std::memory_order_relaxed) + 1, ledger_count_order<Close>);
    row.busy.store(0, std::memory_order_release);  // the revoke reads these stores after it
    return true;
}

}  // namespace cudyn::detail
