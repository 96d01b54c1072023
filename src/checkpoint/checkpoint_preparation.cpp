// cudyn — closing the imports a checkpoint cannot save, and opening them again.
#include "cudyn/checkpoint/checkpoint_preparation.hpp"

#include "cudyn/checkpoint/checkpoint_blockers.hpp"
#include "core/internal.hpp"

#include <string>
#include <utility>

namespace cudyn {

namespace {
constexpr detail::Operation kAdd{"CheckpointPreparation::add"};
constexpr detail::Operation kPrepare{"CheckpointPreparation::prepare"};
constexpr detail::Operation kResume{"CheckpointPreparation::resume"};

std::string describe(const LiveImport& import) {
    return std::string(to_string(import.kind)) + " at " + detail::hex(import.address) + " (" +
           std::to_string(import.size_bytes) + " bytes)";
}

const char* kind_of(bool range) noexcept { return range ? "range" : "ipc-memory"; }
}  // namespace

bool CheckpointPreparation::is_suspended(const Entry& entry) noexcept {
    return entry.range != nullptr ? entry.range->suspended() : entry.memory->suspended();
}

Result<void> CheckpointPreparation::check_added(const void* owner, bool empty, bool suspended, const char* what) const {
    if (prepared_) return kAdd.invalid("the preparation is prepared: resume() before adding to it");
    if (empty) return kAdd.invalid(std::string("the ") + what + " is empty");
    if (suspended) return kAdd.invalid(std::string("the ") + what + " is already suspended");
    for (const Entry& entry : entries_) {
        const void* held = entry.range != nullptr ? static_cast<const void*>(entry.range) : entry.memory;
        if (held == owner) return kAdd.invalid(std::string("the ") + what + " is already added");
    }
    return ok();
}

Result<void> CheckpointPreparation::add(ImportedRange& range) {
    CUDYN_TRY(check_added(&range, range.empty(), !range.empty() && range.suspended(), "range"));
    Entry entry;
    entry.range = &range;
    entry.address = static_cast<std::uintptr_t>(range.device_address());
    // Ranges go before the IPC imports: their rollback keeps every address.
    std::size_t at = 0;
    while (at < entries_.size() && entries_[at].range != nullptr) ++at;
    entries_.insert(entries_.begin() + static_cast<std::ptrdiff_t>(at), entry);
    return ok();
}

Result<void> CheckpointPreparation::add(ImportedIpcMemory& memory, AddressChange change) {
    CUDYN_TRY(check_added(&memory, memory.empty(), !memory.empty() && memory.suspended(), "IPC memory"));
    if (change != AddressChange::Allowed)
        return kAdd.invalid("legacy IPC memory at " + detail::hex(memory.device_address()) +
                            " cannot be opened again at the same address (cuIpcOpenMemHandle picks it): pass "
                            "AddressChange::Allowed and take device_address() again after resume(), or close it "
                            "yourself before the checkpoint");
    Entry entry;
    entry.memory = &memory;
    entry.address = static_cast<std::uintptr_t>(memory.device_address());
    entries_.push_back(entry);
    return ok();
}

Result<void> CheckpointPreparation::prepare() {
    if (prepared_) return kPrepare.invalid("already prepared: resume() first");
    for (Entry& entry : entries_) {
        const bool empty = entry.range != nullptr ? entry.range->empty() : entry.memory->empty();
        if (empty || is_suspended(entry))
            return kPrepare.invalid(std::string("the ") + kind_of(entry.range != nullptr) + " added at " +
                                    detail::hex(entry.address) + " is " + (empty ? "empty" : "suspended") +
                                    " now (closed or suspended by its owner since)");
        // IPC memory may have moved at an earlier resume().
        entry.address = static_cast<std::uintptr_t>(entry.range != nullptr ? entry.range->device_address()
                                                                            : entry.memory->device_address());
    }
    for (const CheckpointBlocker& blocker : checkpoint_blockers()) {
        if (!blocker.blocks_driver) continue;
        bool added = false;
        for (const Entry& entry : entries_) {
            const bool same_kind = entry.range != nullptr ? blocker.import.kind == ImportKind::Range
                                                          : blocker.import.kind == ImportKind::IpcMemory;
            if (same_kind && blocker.import.address == entry.address) added = true;
        }
        if (!added)
            return kPrepare.invalid(describe(blocker.import) +
                                    " blocks a checkpoint and is not in this preparation: " + blocker.remedy);
    }
    for (std::size_t i = 0; i < entries_.size(); ++i) {
        Entry& entry = entries_[i];
        auto suspended = entry.range != nullptr ? entry.range->suspend() : entry.memory->suspend();
        if (suspended) continue;
        Error error = kPrepare.context(std::move(suspended).error());
        error.message += " (" + std::string(kind_of(entry.range != nullptr)) + " at " + detail::hex(entry.address) + ")";
        // Back to where it was: the ones before, last first.
        std::string left;
        if (entry.range != nullptr && entry.range->suspended()) {
            if (auto back = entry.range->resume(); !back) left += "; it stays suspended: " + back.error().describe();
        }
        for (std::size_t j = i; j-- > 0;) {
            Entry& done = entries_[j];
            auto back = done.range != nullptr ? done.range->resume() : done.memory->resume();
            if (!back)
                left += "; " + std::string(kind_of(done.range != nullptr)) + " at " + detail::hex(done.address) +
                        " stays suspended (its resume() retries): " + back.error().describe();
        }
        error.message += left.empty() ? "; every import is open again" : left;
        return error;
    }
    prepared_ = true;
    return ok();
}

Result<void> CheckpointPreparation::resume() {
    if (!prepared_) return kResume.invalid("not prepared (prepare() first)");
    std::size_t resumed = 0;
    for (Entry& entry : entries_) {
        if (!is_suspended(entry)) {
            ++resumed;
            continue;
        }
        auto open = entry.range != nullptr ? entry.range->resume() : entry.memory->resume();
        if (!open) {
            Error error = kResume.context(std::move(open).error());
            error.message += " (" + std::string(kind_of(entry.range != nullptr)) + " at " +
                             detail::hex(entry.address) + "; " + std::to_string(resumed) + " of " +
                             std::to_string(entries_.size()) + " open again, the rest suspended: resume() retries)";
            return error;
        }
        ++resumed;
    }
    prepared_ = false;
    return ok();
}

}  // namespace cudyn
