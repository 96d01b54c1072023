// cudyn — the process's live imports: every cudyn owner that holds memory
// another process owns (or a channel to another process), listed while it
// lives. A checkpoint of this process cannot save memory another process
// owns, so these are what must be closed before one and reopened after
// (checkpoint/checkpoint_blockers.hpp says what to do with each).
//
// Imports are rare and each costs several driver calls, so the list is a
// locked table touched only when an import opens or closes; allocations of
// this process's own memory never touch it. It is kept whatever the memory
// ledger's settings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cudyn {

enum class ImportKind : unsigned char {
    IpcMemory,          // ImportedIpcMemory (cuIpcOpenMemHandle): the driver picks its address
    Pool,               // MemoryPool imported from another process (its pointers are PoolMemory)
    PoolMemory,         // ImportedPoolMemory (cuMemPoolImportPointer): the driver picks its address
    PhysicalMemory,     // PhysicalMemory imported from a POSIX descriptor; the program maps it
    FabricMemory,       // PhysicalMemory imported from a fabric handle; the program maps it
    Range,              // ImportedRange: a reservation of this process mapped with imported chunks
    DescriptorChannel,  // FdChannel: a connected socket (no memory)
};

// "ipc-memory", "pool", "pool-memory", "physical-memory", "fabric-memory",
// "range", "descriptor-channel".
const char* to_string(ImportKind kind) noexcept;

struct LiveImport {
    ImportKind kind = ImportKind::IpcMemory;
    int device = -1;             // the device of the context it was opened in; -1 when none or not known
    std::uintptr_t address = 0;  // where this process sees it: the device address; the handle for
                                 // physical memory and pools; 0 for a channel
    std::uint64_t size_bytes = 0;  // the imported bytes; a range's whole reservation; 0 for a pool or a channel
};

// Every import alive now, oldest first.
std::vector<LiveImport> live_imports();

}  // namespace cudyn
