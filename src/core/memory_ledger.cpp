// cudyn — the memory ledger: one fixed table of rows for what needs the
// process-wide value (live bytes and the peak; the counts too while one
// thread owns the row), per-thread shards for the counts of shared rows, and
// a locked map of per-allocation records only while tracking is on. No lock
// on the counting path.
#include "cudyn/core/memory_ledger.hpp"
#include "cudyn/detail/ledger_row.hpp"
#include "cudyn/detail/ledger_ticket.hpp"
#include "core/live_records.hpp"
#include "core/memory_ledger_internal.hpp"
#include "cudyn/loader/driver_call.hpp"  // CUDYN_DETAIL_COLD

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#if defined(__linux__)
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

// -Dledger=false builds the library with CUDYN_LEDGER_BUILT=0: ledger_open
// then returns an empty ticket without touching anything.
#ifndef CUDYN_LEDGER_BUILT
#define CUDYN_LEDGER_BUILT 1
#endif

namespace cudyn {

namespace {

using detail::ledger_count_order;
using detail::LedgerRow;
using detail::this_thread_identity;
using detail::update_owned;
constexpr std::size_t device_slots = detail::ledger_device_slots;  // rows: see ledger_row_index
constexpr std::size_t row_count = detail::ledger_row_count;

// What needs the process-wide value: the peak is the highest live_bytes ever
// seen, so every open and close updates one live_bytes per row. A locked
// add per update costs as much as the rest of the entry, yet a row is most
// often updated by one thread only (the one that allocates and frees a kind
// on a device). So a row is owned by the first thread that counts in it
// while tracking is off: that thread updates it with plain loads and
// stores inside a window it marks in the row (busy), and counts its opens
// and closes there too, so that its whole entry touches one line and no
// state but the row (a thread is known by its thread pointer, a register,
// not by a thread_local reached through the GOT). The first update by any
// other thread, or tracking switched on, revokes the ownership for good
// (share_owned_rows): from then on every thread updates the row with locked
// instructions and counts in its shard. Where the process cannot fence
// every thread at once (fence_every_thread), or a thread has no pointer to
// be known by, no row is owned.
enum RowOwner : std::uintptr_t {
    Unowned = detail::ledger_row_unowned,
    Revoking = detail::ledger_row_revoking,
    SharedRow = detail::ledger_row_shared,
    NoIdentity = detail::ledger_no_identity,
};  // else the owning thread's pointer

// The rows, and the pointer to them that the inline open and close read.
LedgerRow rows[row_count];

int slot_device(std::size_t slot) noexcept { return slot == 0 ? -1 : static_cast<int>(slot - 1); }

bool environment_says(const char* name, const char* value) {
    const char* set = std::getenv(name);
    return set != nullptr && std::strcmp(set, value) == 0;
}

// Where the process stands, so that an open pays one load and one compare
// (state == Ready): Unread until the environment is read, Off, On (read, and
// no allocation counted yet), Ready (the first allocation started the report,
// when asked for), and the Tracking bit while per-allocation records are
// kept. Only ever changed by fetch_or / fetch_and, so a phase set by one
// thread and the bit set by another never undo each other. In a line of its
// own: written almost never, read by every open.
enum LedgerState : unsigned char { Unread = 0, Off = 1, On = 2, Ready = 3, Phase = 3, Tracking = 4 };
struct alignas(64) LineOfState {
    std::atomic<unsigned char> value{Unread};
};
LineOfState ledger_state;

// CUDYN_LEDGER=0 switches counting off for the whole process, read once.
bool counting() noexcept {
    const unsigned char state = ledger_state.value.load(std::memory_order_acquire);
    if (state != Unread) return (state & Phase) != Off;
    static const bool on = [] {
        const bool enabled = CUDYN_LEDGER_BUILT != 0 && !environment_says("CUDYN_LEDGER", "0");
        ledger_state.value.fetch_or(enabled ? On : Off, std::memory_order_release);
        return enabled;
    }();
    return on;
}

// ---- counts, in per-thread shards --------------------------------------------------------------

// The opens and closes of each row made by the threads that held this shard.
// One thread at a time writes a shard, so a count is a plain load and store
// (no locked instruction); snapshot() sums every shard. live_count is opens -
// closes, total_allocations is opens.
struct ShardRow {
    std::atomic<std::uint64_t> opens{0};
    std::atomic<std::uint64_t> closes{0};
};
struct Shard {
    ShardRow rows[row_count];
};

// Counts of threads that cannot have a shard of their own (exiting, or no
// memory for one), with atomic adds.
Shard shared_shard;

// Every shard ever made (two counts per row; never freed: snapshot() sums them
// all, and an owner may close at static destruction), and those no thread
// holds now: a thread hands its shard back when it ends and the next new
// thread takes it, so the list grows with the most threads counting at once,
// not with every thread.
struct ShardList {
    std::mutex mutex;
    std::vector<Shard*> all;
    std::vector<Shard*> free;  // capacity kept at least all.size(): handing back never allocates
};
ShardList& shard_list() {
    static ShardList* const instance = new ShardList;  // never destroyed, as the shards
    return *instance;
}

// Trivial thread_locals: reached without an initialisation check.
// this_thread_shard, read by every open and close of a shared row, is initial-exec on ELF
// with glibc: reaching it is one load at a fixed offset from the thread
// pointer, not a call to __tls_get_addr (-fPIC's default, general-dynamic),
// which first reads the thread's DTV and its generation: lines that a driver
// call between an open and its close has likely pushed out of the cache. Its
// 8 bytes come from the static TLS space glibc keeps spare for libraries
// loaded by dlopen.
#if defined(__ELF__) && defined(__GLIBC__)
#define CUDYN_LEDGER_TLS __attribute__((tls_model("initial-exec")))
#else
#define CUDYN_LEDGER_TLS
#endif
CUDYN_LEDGER_TLS thread_local Shard* this_thread_shard = nullptr;
thread_local bool this_thread_ended = false;

// Its destructor, at thread exit, hands the thread's shard back (the counts
// stay in it). Closes after that (a thread_local owner destroyed later, or a
// static one at exit on the main thread) count in the shared shard.
struct ShardReturn {
    ShardReturn() = default;
    ShardReturn(const ShardReturn&) = delete;
    ShardReturn& operator=(const ShardReturn&) = delete;
    ~ShardReturn() {
        this_thread_ended = true;
        Shard* const shard = std::exchange(this_thread_shard, nullptr);
        if (shard == nullptr) return;
        ShardList& list = shard_list();
        try {
            const std::lock_guard<std::mutex> lock(list.mutex);
            list.free.push_back(shard);  // within its capacity: no allocation
        } catch (...) {  // the lock refused: the shard is not reused, its counts still summed
        }
    }
};

// The calling thread's shard, taken at its first count; nullptr: count in the
// shared one.
CUDYN_DETAIL_COLD Shard* claim_shard() noexcept {
#if defined(_WIN32)
    // A thread_local's destructor in a DLL did not run at thread exit (MinGW
    // under wine: every ended thread kept its shard), so shards would grow
    // with every thread ever started: Windows counts in the shared shard.
    return nullptr;
#endif
    if (this_thread_ended) return nullptr;
    try {
        thread_local ShardReturn hand_back;  // registered before the shard is taken
        (void)hand_back;
        ShardList& list = shard_list();
        const std::lock_guard<std::mutex> lock(list.mutex);
        if (!list.free.empty()) {
            this_thread_shard = list.free.back();
            list.free.pop_back();
        } else {
            auto fresh = std::make_unique<Shard>();
            list.free.reserve(list.all.size() + 1);
            list.all.push_back(fresh.get());
            this_thread_shard = fresh.release();
        }
        return this_thread_shard;
    } catch (...) {  // no memory for a shard: counted in the shared one
        return nullptr;
    }
}

// One more open or close in the calling thread's own shard: a plain load and
// store, no locked instruction.
template <bool Close>
void count_own(Shard& own, std::size_t row) noexcept {
    std::atomic<std::uint64_t>& counter = Close ? own.rows[row].closes : own.rows[row].opens;
    counter.store(counter.load(std::memory_order_relaxed) + 1, ledger_count_order<Close>);
}

template <bool Close>
void count(std::size_t row) noexcept {
    Shard* const own = this_thread_shard != nullptr ? this_thread_shard : claim_shard();
    if (own != nullptr) return count_own<Close>(*own, row);
    ShardRow& counts = shared_shard.rows[row];
    (Close ? counts.closes : counts.opens).fetch_add(1, ledger_count_order<Close>);
}

// ---- live bytes and peaks: a row's owner, its window and the revoke ----------------------------

// Owners are given and revoked one row at a time, rarely (once a row per
// process at most): a spin lock that cannot fail or throw, as a close in a
// destructor needs.
std::atomic<bool> settling{false};

#if defined(__linux__)
long membarrier(int command) noexcept { return syscall(__NR_membarrier, command, 0, 0); }

// A forked child has only the forking thread: a window another thread had
// open, and the settling lock it held, would stay closed to the child for
// ever. Whatever those threads were counting is not the child's to count.
void after_fork_in_child() noexcept {
    for (LedgerRow& row : rows) row.busy.store(0, std::memory_order_relaxed);
    settling.store(false, std::memory_order_relaxed);
}
#endif

// Whether fence_every_thread can work here: on Linux, the process registered
// for membarrier's private expedited command (its registration is the
// process's, kept across fork, dropped at exec). Asked once, when the first
// row gets an owner.
bool biasing_available() noexcept {
#if defined(__linux__)
    static const bool available = [] {
        const long commands = membarrier(MEMBARRIER_CMD_QUERY);
        if (commands < 0 || (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
        if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0) return false;
        if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) return false;
        return pthread_atfork(nullptr, nullptr, after_fork_in_child) == 0;
    }();
    return available;
#else
    return false;  // no fence of every thread here: no row is owned
#endif
}

// Every running thread of the process passes a full memory fence before this
// returns: the other side of the owner's window, whose own order is only the
// compiler's (update_owned).
void fence_every_thread() noexcept {
#if defined(__linux__)
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
    // Refused after a successful registration: the slower command that fences
    // every CPU needs none.
    (void)membarrier(MEMBARRIER_CMD_GLOBAL);
#endif
}

// A shared row: a locked add (or subtract), and the peak raised with a
// compare-exchange only when passed.
template <bool Close>
inline void update_shared(LedgerRow& row, std::uint64_t bytes) noexcept {
    if (Close) {
        row.live_bytes.fetch_sub(bytes, std::memory_order_relaxed);
        return;
    }
    const std::uint64_t live = row.live_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::uint64_t peak = row.peak_bytes.load(std::memory_order_relaxed);
    while (live > peak && !row.peak_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
}

// Under `settling`: the rows of [first, last) that a thread owns are shared
// for good. Each is marked, every thread fenced once, each owner's open
// window waited out (its stores then read before any locked add), and the
// row shared.
void share_owned_rows(LedgerRow* first, LedgerRow* last) noexcept {
    bool marked = false;
    for (LedgerRow* row = first; row != last; ++row) {
        const std::uintptr_t owner = row->owner.load(std::memory_order_relaxed);
        if (owner == Unowned || owner == SharedRow) continue;
        row->owner.store(Revoking, std::memory_order_relaxed);
        marked = true;
    }
    if (!marked) return;
    fence_every_thread();
    for (LedgerRow* row = first; row != last; ++row) {
        if (row->owner.load(std::memory_order_relaxed) != Revoking) continue;
        while (row->busy.load(std::memory_order_acquire) != 0) std::this_thread::yield();
        row->owner.store(SharedRow, std::memory_order_release);
    }
}

void lock_settling() noexcept {
    while (settling.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
}
void unlock_settling() noexcept { settling.store(false, std::memory_order_release); }

// An unowned row gets `own` (a thread's identity) as its owner, or is shared
// (no identity, no fence here, or tracking on: a tracked open must not take
// the owner's path); a row another thread owns is shared.
void settle_owner(LedgerRow& row, std::uintptr_t own) noexcept {
    lock_settling();
    const std::uintptr_t owner = row.owner.load(std::memory_order_relaxed);
    if (owner == Unowned) {
        const bool tracking = (ledger_state.value.load(std::memory_order_relaxed) & Tracking) != 0;
        row.owner.store(own > NoIdentity && !tracking && biasing_available() ? own : SharedRow,
                        std::memory_order_release);
    } else if (owner != SharedRow && owner != own) {
        share_owned_rows(&row, &row + 1);
    }
    unlock_settling();
}

// Counts an open (or close) of `bytes` in row `index` by the calling thread:
// on the owner's path where the row is the thread's, else shared (the count
// then in the thread's shard), settling the row first where it is unowned
// or another's.
template <bool Close>
void account(std::size_t index, std::uint64_t bytes) noexcept {
    LedgerRow& row = rows[index];
    const std::uintptr_t self = this_thread_identity();
    for (;;) {
        const std::uintptr_t owner = row.owner.load(std::memory_order_acquire);
        if (owner == SharedRow) {
            update_shared<Close>(row, bytes);
            return count<Close>(index);
        }
        if (owner == self && update_owned<Close>(row, self, bytes)) return;
        settle_owner(row, self);  // unowned, another's, or revoked meanwhile
    }
}

// ---- per-allocation records, while tracking ---------------------------------------------------

thread_local const char* current_label = nullptr;

using Tracker = detail::LiveRecords<LiveAllocation>;

void report_at_exit() {
    const std::vector<LiveAllocation> alive = ledger::live_allocations();
    std::fprintf(stderr, "cudyn ledger: %zu allocation(s) still alive at exit\n", alive.size());
    for (const LiveAllocation& allocation : alive) {
        std::fprintf(stderr, "  %-20s device %2d  %12llu B at 0x%llx  %s\n", to_string(allocation.kind),
                     allocation.device, static_cast<unsigned long long>(allocation.bytes),
                     static_cast<unsigned long long>(allocation.address), allocation.label.c_str());
    }
}

// CUDYN_LEDGER_REPORT=1: track from the first allocation and report at exit.
// Only the first allocation comes here (then the state is Ready).
void start_report_once() noexcept {
    static const bool started = [] {
        if (!environment_says("CUDYN_LEDGER_REPORT", "1")) return false;
        ledger_state.value.fetch_or(Tracking, std::memory_order_relaxed);
        std::atexit(report_at_exit);
        return true;
    }();
    (void)started;
    ledger_state.value.fetch_or(Ready, std::memory_order_release);
}

std::uint64_t track(MemoryKind kind, int device, std::uint64_t bytes, std::uintptr_t address) {
    return Tracker::instance().add(LiveAllocation{kind, device, bytes, address, current_label ? current_label : ""});
}

CUDYN_DETAIL_COLD void untrack(std::uint64_t id) noexcept {
    Tracker::instance().remove(id);
}

// The opens and closes of every row, summed over the shards and the row's owner.
struct Counts {
    std::vector<std::uint64_t> opens = std::vector<std::uint64_t>(row_count);
    std::vector<std::uint64_t> closes = std::vector<std::uint64_t>(row_count);
};

// Row by row, every close (the owner's, then every shard's) and then every
// open (see count()), so a row's two sums are read close together.
Counts sum_shards() {
    Counts sum;
    ShardList& list = shard_list();
    const std::lock_guard<std::mutex> lock(list.mutex);
    for (std::size_t row = 0; row < row_count; ++row) {
        std::uint64_t closes = rows[row].owner_closes.load(std::memory_order_acquire) +
                               shared_shard.rows[row].closes.load(std::memory_order_acquire);
        for (const Shard* shard : list.all) closes += shard->rows[row].closes.load(std::memory_order_acquire);
        std::uint64_t opens = rows[row].owner_opens.load(std::memory_order_relaxed) +
                              shared_shard.rows[row].opens.load(std::memory_order_relaxed);
        for (const Shard* shard : list.all) opens += shard->rows[row].opens.load(std::memory_order_relaxed);
        sum.closes[row] = closes;
        sum.opens[row] = opens;
    }
    return sum;
}

LedgerEntry read_row(std::size_t row, const Counts& counts) noexcept {
    const LedgerRow& counters = rows[row];
    LedgerEntry entry;
    entry.kind = static_cast<MemoryKind>(row / device_slots);
    entry.device = slot_device(row % device_slots);
    entry.live_bytes = counters.live_bytes.load(std::memory_order_relaxed);
    entry.live_count = counts.opens[row] - counts.closes[row];
    entry.peak_bytes = counters.peak_bytes.load(std::memory_order_relaxed);
    entry.total_allocations = counts.opens[row];
    return entry;
}

// The first allocations: reads the environment and starts the report when
// asked for. The state to go on with; Off: not counted.
CUDYN_DETAIL_COLD unsigned char settle(unsigned char state) noexcept {
    if ((state & Phase) == Ready) return state;
    if ((state & Phase) == Off || !counting()) return Off;
    start_report_once();
    return ledger_state.value.load(std::memory_order_acquire);
}

// Tracking on: the record's id (0: no memory for it, counted but not listed).
CUDYN_DETAIL_COLD std::uint64_t record(MemoryKind kind, int device, std::uint64_t bytes,
                                       std::uintptr_t address) noexcept {
    try {
        return track(kind, device, bytes, address);
    } catch (...) {
        return 0;
    }
}

}  // namespace

const char* to_string(MemoryKind kind) noexcept {
    switch (kind) {
        case MemoryKind::Device: return "device";
        case MemoryKind::Pinned: return "pinned";
        case MemoryKind::Mapped: return "mapped";
        case MemoryKind::Registered: return "registered";
        case MemoryKind::Managed: return "managed";
        case MemoryKind::VmmPhysical: return "vmm-physical";
        case MemoryKind::VmmMapped: return "vmm-mapped";
        case MemoryKind::VmmReserved: return "vmm-reserved";
        case MemoryKind::Pool: return "pool";
        case MemoryKind::StreamOrdered: return "stream-ordered";
        case MemoryKind::IpcOpened: return "ipc-opened";
        case MemoryKind::PoolImported: return "pool-imported";
        case MemoryKind::AllocationImported: return "allocation-imported";
    }
    return "unknown";
}

LedgerEntry LedgerSnapshot::of(MemoryKind kind, int device) const noexcept {
    for (const LedgerEntry& entry : entries) {
        if (entry.kind == kind && entry.device == device) return entry;
    }
    LedgerEntry none;
    none.kind = kind;
    none.device = device;
    return none;
}

LedgerEntry LedgerSnapshot::of(MemoryKind kind) const noexcept {
    LedgerEntry sum;
    sum.kind = kind;
    for (const LedgerEntry& entry : entries) {
        if (entry.kind != kind) continue;
        sum.live_bytes += entry.live_bytes;
        sum.live_count += entry.live_count;
        sum.peak_bytes += entry.peak_bytes;
        sum.total_allocations += entry.total_allocations;
    }
    return sum;
}

std::uint64_t LedgerSnapshot::live_bytes() const noexcept {
    std::uint64_t sum = 0;
    for (const LedgerEntry& entry : entries) {
        if (entry.kind != MemoryKind::VmmReserved && entry.kind != MemoryKind::Pool) sum += entry.live_bytes;
    }
    return sum;
}

namespace ledger {

bool enabled() noexcept { return counting(); }

LedgerSnapshot snapshot() {
    LedgerSnapshot result;
    result.enabled = counting();
    if (!result.enabled) return result;
    const Counts counts = sum_shards();
    for (std::size_t row = 0; row < row_count; ++row) {
        if (counts.opens[row] != 0) result.entries.push_back(read_row(row, counts));
    }
    return result;
}

void reset_peaks() noexcept {
    for (LedgerRow& counters : rows) {
        counters.peak_bytes.store(counters.live_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
}

void track_allocations(bool on) {
    if (on && counting()) {
        // The owner's path takes no record: every owned row is shared first
        // (and none is given an owner while tracking is on).
        ledger_state.value.fetch_or(Tracking, std::memory_order_relaxed);
        lock_settling();
        share_owned_rows(std::begin(rows), std::end(rows));
        unlock_settling();
    } else {
        ledger_state.value.fetch_and(static_cast<unsigned char>(~Tracking), std::memory_order_relaxed);
    }
}
bool tracking_allocations() noexcept {
    return (ledger_state.value.load(std::memory_order_relaxed) & Tracking) != 0;
}

std::vector<LiveAllocation> live_allocations() { return Tracker::instance().list(); }

std::string format(const LedgerSnapshot& snapshot) {
    if (!snapshot.enabled) return "ledger off\n";
    std::string text;
    char line[160];
    for (const LedgerEntry& entry : snapshot.entries) {
        std::snprintf(line, sizeof line, "%-20s dev %2d  live %llu B in %llu  peak %llu B  total %llu\n",
                      to_string(entry.kind), entry.device, static_cast<unsigned long long>(entry.live_bytes),
                      static_cast<unsigned long long>(entry.live_count),
                      static_cast<unsigned long long>(entry.peak_bytes),
                      static_cast<unsigned long long>(entry.total_allocations));
        text += line;
    }
    return text;
}

}  // namespace ledger

LedgerLabel::LedgerLabel(const char* label) noexcept : previous_(current_label), text_{} {
    if (label != nullptr) std::strncpy(text_, label, sizeof text_ - 1);
    current_label = text_;
}

LedgerLabel::~LedgerLabel() { current_label = previous_; }

namespace detail {

LedgerRow* const ledger_rows = rows;

// Not cold: a row that several threads count in comes here for every open.
CUDYN_DETAIL_OUT_OF_LINE void LedgerTicket::open_uncommon(MemoryKind kind, int device, std::size_t bytes,
                                                          std::uintptr_t address) noexcept {
    const unsigned char state = settle(ledger_state.value.load(std::memory_order_acquire));
    if (state == Off) return;
    const std::size_t row = detail::ledger_row_index(kind, device);
    account<false>(row, bytes);
    row_ = static_cast<std::uint32_t>(row + 1);
    bytes_ = bytes;
    if (state != Ready) record_ = record(kind, device, bytes, address);  // Ready | Tracking
}

LedgerTicket ledger_open(MemoryKind kind, int device, std::size_t bytes, std::uintptr_t address) noexcept {
    LedgerTicket ticket;
    ticket.open(kind, device, bytes, address);
    return ticket;
}

// What the 0.2.0 header's inline close() calls: close() itself.
void LedgerTicket::close_counted() noexcept { close(); }

CUDYN_DETAIL_OUT_OF_LINE void LedgerTicket::close_uncommon() noexcept {
    account<true>(row_ - 1, bytes_);
    if (record_ != 0) untrack(record_);
    row_ = 0;
    record_ = 0;
}

LedgerRowBias ledger_row_bias(MemoryKind kind, int device) noexcept {
    const std::uintptr_t owner = rows[detail::ledger_row_index(kind, device)].owner.load(std::memory_order_acquire);
    if (owner == Unowned) return LedgerRowBias::Unowned;
    return owner == SharedRow || owner == Revoking ? LedgerRowBias::Shared : LedgerRowBias::Owned;
}

bool ledger_biasing_available() noexcept { return this_thread_identity() > NoIdentity && biasing_available(); }

std::size_t ledger_shard_count() noexcept {
    ShardList& list = shard_list();
    const std::lock_guard<std::mutex> lock(list.mutex);
    return list.all.size();
}

}  // namespace detail

}  // namespace cudyn
