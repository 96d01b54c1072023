// cudyn — the memory ledger: one fixed table of atomic counters (no lock on
// the counting path), and a locked map of per-allocation records only while
// tracking is on.
#include "cudyn/core/memory_ledger.hpp"
#include "cudyn/detail/ledger_ticket.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

// -Dledger=false builds the library with CUDYN_LEDGER_BUILT=0: ledger_open
// then returns an empty ticket without touching anything.
#ifndef CUDYN_LEDGER_BUILT
#define CUDYN_LEDGER_BUILT 1
#endif

namespace cudyn {

namespace {

// Rows: kind * device_slots + slot, slot 0 for "no device", 1..64 for ordinals 0..63.
constexpr std::size_t device_slots = 65;
constexpr std::size_t row_count = memory_kind_count * device_slots;

struct Counters {
    std::atomic<std::uint64_t> live_bytes{0};
    std::atomic<std::uint64_t> live_count{0};
    std::atomic<std::uint64_t> peak_bytes{0};
    std::atomic<std::uint64_t> total_allocations{0};
};

Counters rows[row_count];

std::size_t device_slot(int device) noexcept {
    return device >= 0 && static_cast<std::size_t>(device) < device_slots - 1 ? static_cast<std::size_t>(device) + 1
                                                                              : 0;
}
int slot_device(std::size_t slot) noexcept { return slot == 0 ? -1 : static_cast<int>(slot - 1); }

bool environment_says(const char* name, const char* value) {
    const char* set = std::getenv(name);
    return set != nullptr && std::strcmp(set, value) == 0;
}

// CUDYN_LEDGER=0 switches counting off for the whole process, read once.
bool counting() noexcept {
    static const bool on = CUDYN_LEDGER_BUILT != 0 && !environment_says("CUDYN_LEDGER", "0");
    return on;
}

// ---- per-allocation records, while tracking ---------------------------------------------------

thread_local const char* current_label = nullptr;

struct Tracker {
    std::mutex mutex;
    std::uint64_t next_id = 1;
    std::map<std::uint64_t, LiveAllocation> live;  // by id: oldest first
};
Tracker& tracker() {
    static Tracker* const instance = new Tracker;  // never destroyed: owners may close at static destruction
    return *instance;
}
std::atomic<bool> tracking{false};

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
void start_report_once() {
    static const bool started = [] {
        if (!counting() || !environment_says("CUDYN_LEDGER_REPORT", "1")) return false;
        tracking.store(true, std::memory_order_relaxed);
        std::atexit(report_at_exit);
        return true;
    }();
    (void)started;
}

std::uint64_t track(MemoryKind kind, int device, std::uint64_t bytes, std::uintptr_t address) {
    Tracker& state = tracker();
    const std::lock_guard<std::mutex> lock(state.mutex);
    const std::uint64_t id = state.next_id++;
    state.live.emplace(id, LiveAllocation{kind, device, bytes, address, current_label ? current_label : ""});
    return id;
}

void untrack(std::uint64_t id) noexcept {
    Tracker& state = tracker();
    const std::lock_guard<std::mutex> lock(state.mutex);
    state.live.erase(id);
}

LedgerEntry read_row(std::size_t row) noexcept {
    const Counters& counters = rows[row];
    LedgerEntry entry;
    entry.kind = static_cast<MemoryKind>(row / device_slots);
    entry.device = slot_device(row % device_slots);
    entry.live_bytes = counters.live_bytes.load(std::memory_order_relaxed);
    entry.live_count = counters.live_count.load(std::memory_order_relaxed);
    entry.peak_bytes = counters.peak_bytes.load(std::memory_order_relaxed);
    entry.total_allocations = counters.total_allocations.load(std::memory_order_relaxed);
    return entry;
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
    for (std::size_t row = 0; row < row_count; ++row) {
        if (rows[row].total_allocations.load(std::memory_order_relaxed) != 0) result.entries.push_back(read_row(row));
    }
    return result;
}

void reset_peaks() noexcept {
    for (Counters& counters : rows) {
        counters.peak_bytes.store(counters.live_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
}

void track_allocations(bool on) { tracking.store(on && counting(), std::memory_order_relaxed); }
bool tracking_allocations() noexcept { return tracking.load(std::memory_order_relaxed); }

std::vector<LiveAllocation> live_allocations() {
    Tracker& state = tracker();
    const std::lock_guard<std::mutex> lock(state.mutex);
    std::vector<LiveAllocation> alive;
    alive.reserve(state.live.size());
    for (const auto& record : state.live) alive.push_back(record.second);
    return alive;
}

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

LedgerTicket ledger_open(MemoryKind kind, int device, std::size_t bytes, std::uintptr_t address) noexcept {
    LedgerTicket ticket;
    if (!counting()) return ticket;
    start_report_once();
    const std::size_t row = static_cast<std::size_t>(kind) * device_slots + device_slot(device);
    Counters& counters = rows[row];
    const std::uint64_t live = counters.live_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    counters.live_count.fetch_add(1, std::memory_order_relaxed);
    counters.total_allocations.fetch_add(1, std::memory_order_relaxed);
    std::uint64_t peak = counters.peak_bytes.load(std::memory_order_relaxed);
    while (live > peak && !counters.peak_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
    ticket.row_ = static_cast<std::uint32_t>(row + 1);
    ticket.bytes_ = bytes;
    if (tracking.load(std::memory_order_relaxed)) {
        try {
            ticket.record_ = track(kind, device, bytes, address);
        } catch (...) {  // no memory for the record: counted, not listed
            ticket.record_ = 0;
        }
    }
    return ticket;
}

void LedgerTicket::close_counted() noexcept {
    Counters& counters = rows[row_ - 1];
    counters.live_bytes.fetch_sub(bytes_, std::memory_order_relaxed);
    counters.live_count.fetch_sub(1, std::memory_order_relaxed);
    if (record_ != 0) untrack(record_);
    row_ = 0;
    record_ = 0;
}

}  // namespace detail

}  // namespace cudyn
