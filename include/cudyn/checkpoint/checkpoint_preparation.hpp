// cudyn — the target's side of a checkpoint: closing, before another process
// checkpoints this one, the imports the driver cannot save (memory another
// process owns), and opening them again after.
//
//     cudyn::CheckpointPreparation preparation;
//     CUDYN_TRY(preparation.add(imported_range));             // reopens at the same address
//     CUDYN_TRY(preparation.add(ipc_memory, cudyn::AddressChange::Allowed));  // reopens elsewhere
//     CUDYN_TRY(preparation.prepare());   // closed; nothing else blocks
//     ... tell the controller; it locks, checkpoints, restores, unlocks this process ...
//     CUDYN_TRY(preparation.resume());    // open again; take ipc_memory.device_address() anew
//
// The preparation holds references: the owners added must stay where they
// are (not moved or destroyed) until resume() or until it goes. Dropping it
// changes nothing: what it closed stays closed, for each owner's resume() or
// its destructor. Multicast objects are out of its scope.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/share/imported_ipc_memory.hpp"
#include "cudyn/share/range_sharing.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cudyn {

// Whether an import may come back at another address. Legacy IPC memory
// cannot come back where it was: cuIpcOpenMemHandle picks the address.
enum class AddressChange { Refused, Allowed };

class CheckpointPreparation {
public:
    CheckpointPreparation() = default;

    // Names an import to close before the checkpoint and open again after.
    // InvalidArgument, nothing added, for an empty or suspended owner, one
    // already added, and any add once prepared. A legacy IPC import needs
    // AddressChange::Allowed: with Refused it is InvalidArgument (close it
    // yourself, or accept that resume() moves it).
    Result<void> add(ImportedRange& range);
    Result<void> add(ImportedIpcMemory& memory, AddressChange change);

    // Checks first, before any driver call, that every import that blocks a
    // checkpoint (checkpoint_blockers(), channels aside) is one added here:
    // InvalidArgument naming the first that is not, and what to do about
    // it. Then suspends each import, ranges first and IPC memory last; a
    // refusal resumes those already suspended (the IPC ones possibly at new
    // addresses) and names the import and the step. Prepared on success.
    Result<void> prepare();
    // Resumes each import prepare() suspended, in the same order. A refusal
    // names the import; those before it are open again, it and those after
    // stay suspended, and the preparation stays prepared: resume() again
    // retries the rest. InvalidArgument when not prepared.
    Result<void> resume();

    bool prepared() const noexcept { return prepared_; }
    std::size_t size() const noexcept { return entries_.size(); }

private:
    struct Entry {
        ImportedRange* range = nullptr;      // one of the two
        ImportedIpcMemory* memory = nullptr;
        std::uintptr_t address = 0;          // where it was when added: names it in messages
    };
    Result<void> check_added(const void* owner, bool empty, bool suspended, const char* what) const;
    static bool is_suspended(const Entry& entry) noexcept;

    std::vector<Entry> entries_;  // ranges first, then IPC memory
    bool prepared_ = false;
};

}  // namespace cudyn
