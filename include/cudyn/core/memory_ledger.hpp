// cudyn — the memory ledger: what this process holds through cudyn owners,
// by kind and device (live bytes, live count, peak, total allocations).
//
// Every owner of memory counts itself in when it is made and out when its
// memory goes back to the driver (or is let go unreleased at exit). Counting
// takes no lock: one atomic add to the live bytes (which the peak follows)
// and a plain store to a per-thread count; CUDYN_LEDGER=0 in the environment
// switches it off at run time, and building with -Dledger=false removes it.
// Per-allocation records (address, size, label) are kept only while tracking
// is on: ledger::track_allocations(true), or CUDYN_LEDGER_REPORT=1, which also
// prints what is still alive when the process exits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cudyn {

// One row per kind of owner.
enum class MemoryKind : unsigned char {
    Device,              // DeviceBuffer (cuMemAlloc)
    Pinned,              // PinnedBuffer (cuMemHostAlloc)
    Mapped,              // ZeroCopyBuffer (mapped host memory)
    Registered,          // HostRegistration (cuMemHostRegister)
    Managed,             // ManagedBuffer (cuMemAllocManaged)
    VmmPhysical,         // PhysicalMemory (cuMemCreate)
    VmmMapped,           // MappedRange (cuMemMap)
    VmmReserved,         // AddressRange (cuMemAddressReserve): addresses, not memory
    Pool,                // MemoryPool (count only: its reserve changes under the driver)
    StreamOrdered,       // StreamOrderedBuffer (cuMemAllocAsync / FromPoolAsync)
    IpcOpened,           // ImportedIpcMemory (cuIpcOpenMemHandle)
    PoolImported,        // memory of a pool shared by another process
    AllocationImported,  // physical memory imported from a shareable handle
};
constexpr std::size_t memory_kind_count = 13;

// "device", "pinned", ..., "allocation-imported".
const char* to_string(MemoryKind kind) noexcept;

// The counters of one (kind, device). device is the ordinal of the context
// the owner was made in; -1 when none was current (and for ordinals past the
// ledger's rows, 64 and up).
struct LedgerEntry {
    MemoryKind kind = MemoryKind::Device;
    int device = -1;
    std::uint64_t live_bytes = 0;
    std::uint64_t live_count = 0;
    std::uint64_t peak_bytes = 0;         // highest live_bytes since start or reset_peaks()
    std::uint64_t total_allocations = 0;  // ever counted in
};

struct LedgerSnapshot {
    bool enabled = false;              // false: compiled out or CUDYN_LEDGER=0; everything reads 0
    std::vector<LedgerEntry> entries;  // rows that ever counted something, by kind then device

    // The row of (kind, device); zeros when it never counted anything.
    LedgerEntry of(MemoryKind kind, int device) const noexcept;
    // A kind summed over devices (peak_bytes: the sum of each device's peak).
    LedgerEntry of(MemoryKind kind) const noexcept;
    // Live bytes over every kind that is memory (VmmReserved and Pool left out).
    std::uint64_t live_bytes() const noexcept;
};

// One live allocation, while tracking is on.
struct LiveAllocation {
    MemoryKind kind = MemoryKind::Device;
    int device = -1;
    std::uint64_t bytes = 0;
    std::uintptr_t address = 0;
    std::string label;  // the LedgerLabel in force when it was made; empty when none
};

namespace ledger {

// Whether the ledger counts (built in and not switched off by CUDYN_LEDGER=0).
bool enabled() noexcept;
LedgerSnapshot snapshot();
// Every peak set to what is live now.
void reset_peaks() noexcept;
// Keeps a record of each allocation from now on (those already live are not
// listed). Costs a lock per allocation and free while on.
void track_allocations(bool on);
bool tracking_allocations() noexcept;
// The tracked allocations still alive, oldest first.
std::vector<LiveAllocation> live_allocations();
// The snapshot as text, one line per row:
// "device      dev 0  live 1048576 B in 2  peak 2097152 B  total 3".
std::string format(const LedgerSnapshot& snapshot);

}  // namespace ledger

// Labels the allocations the calling thread makes while it lives (nested
// labels: the innermost wins; longer than 31 characters: cut). Recorded only
// while tracking is on.
class LedgerLabel {
public:
    explicit LedgerLabel(const char* label) noexcept;
    ~LedgerLabel();
    LedgerLabel(const LedgerLabel&) = delete;
    LedgerLabel& operator=(const LedgerLabel&) = delete;

private:
    const char* previous_;
    char text_[32];
};

}  // namespace cudyn
