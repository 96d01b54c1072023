// cudyn — ImportedIpcMemory: cuIpcOpenMemHandle / cuIpcCloseMemHandle, with the
// process's record of imported handles that enforces one import per context.
#include "cudyn/share/imported_ipc_memory.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "core/internal.hpp"

#include <array>
#include <cstddef>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <utility>

namespace cudyn {

namespace {

// (context, handle bytes) of every live ImportedIpcMemory of this process.
//
// The first kInline records live in a fixed array inside the record itself,
// so a process's first import (a cold process, where every allocation and
// every first-run code path shows next to the driver's own cost) allocates
// nothing and runs no tree code. Records beyond those go to a std::set
// allocated on first need.
class ImportRecord {
public:
    using Key = std::pair<CUcontext, IpcMemoryHandle::Bytes>;

    // False when the key is already there.
    bool claim(const Key& key) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (std::size_t i = 0; i < inline_count_; ++i)
            if (inline_[i] == key) return false;
        if (overflow_ != nullptr && overflow_->count(key) != 0) return false;
        if (inline_count_ < kInline) {
            inline_[inline_count_++] = key;
            return true;
        }
        if (overflow_ == nullptr) overflow_ = new std::set<Key>();  // never freed, like the record
        return overflow_->insert(key).second;
    }
    void release(const Key& key) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (std::size_t i = 0; i < inline_count_; ++i) {
            if (inline_[i] == key) {
                inline_[i] = inline_[--inline_count_];
                return;
            }
        }
        if (overflow_ != nullptr) overflow_->erase(key);
    }

private:
    static constexpr std::size_t kInline = 16;
    std::mutex mutex_;
    std::size_t inline_count_ = 0;
    std::array<Key, kInline> inline_{};
    std::set<Key>* overflow_ = nullptr;
};

// Never destroyed: ImportedIpcMemory destructors may run during static destruction.
// Built in static storage, not on the heap (see above).
ImportRecord& import_record() {
    alignas(ImportRecord) static unsigned char storage[sizeof(ImportRecord)];
    static ImportRecord* const record = new (storage) ImportRecord();
    return *record;
}

constexpr detail::Operation kImport{"import_ipc_memory"};

Error import_error(Error error) {
    switch (error.driver_result) {
        case CUDA_ERROR_ALREADY_MAPPED:
            error.message = "this context has already imported the handle (CUDA allows one import per context "
                            "per handle; share the first ImportedIpcMemory)";
            break;
        case CUDA_ERROR_INVALID_CONTEXT:
            error.message = "no usable current context (PrimaryContext::activate first), or the handle was "
                            "exported by this process";
            break;
        case CUDA_ERROR_INVALID_VALUE:
        case CUDA_ERROR_INVALID_HANDLE:
        case CUDA_ERROR_MAP_FAILED:
            error.message += ": the exporter may have freed the memory or exited, or the handle comes from "
                             "another machine";
            break;
        case CUDA_ERROR_TOO_MANY_PEERS:
            // Memory of another device is mapped through peer access, which
            // the import enables lazily; each device has a bounded number.
            error.message += ": the memory is on another device and this device has as many peer mappings as the "
                             "driver allows (its peer limit, or its BAR1 aperture is full); close imports or "
                             "disable peer access no longer used";
            break;
        default: break;
    }
    return error;
}

Result<CUdeviceptr> import_handle(const IpcMemoryHandle& handle) {
    CUdeviceptr base = 0;
    const CUipcMemHandle raw = handle.to_cu();
    const unsigned int flags = CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS;
    Result<void> imported = has_entry(&DriverTable::cuIpcOpenMemHandle_v11000)
                                ? call_driver(&DriverTable::cuIpcOpenMemHandle_v11000, &base, raw, flags)
                                : call_driver(&DriverTable::cuIpcOpenMemHandle_v4010, &base, raw, flags);
    if (!imported) return import_error(std::move(imported).error());
    return base;
}

}  // namespace

Result<ImportedIpcMemory> import_ipc_memory(const IpcMemoryDescriptor& descriptor) {
    if (descriptor.exported_by_this_process())
        return kImport.invalid("the descriptor was exported by this process; CUDA does not let a process import "
                               "its own IPC handle (use the memory directly)");
    CUDYN_TRY_ASSIGN(auto owner, detail::OwnerContext::current());
    const CUcontext context = owner.handle();
    const ImportRecord::Key key{context, descriptor.handle().to_bytes()};
    if (context != nullptr && !import_record().claim(key))
        return kImport.invalid("this handle is already imported in the current context (CUDA allows one import "
                               "per context per handle; share the first ImportedIpcMemory)");
    auto base = import_handle(descriptor.handle());
    if (!base) {
        if (context != nullptr) import_record().release(key);
        return std::move(base).error();
    }
    ImportedIpcMemory imported(*base, static_cast<std::size_t>(descriptor.offset_bytes()),
                               static_cast<std::size_t>(descriptor.size_bytes()), std::move(owner),
                               descriptor.handle());
    // The descriptor's sizes are the exporter's word: check them against what
    // was mapped. A check that cannot be made fails the import (closed
    // again): an unchecked size could let a span run past the mapping.
    CUdeviceptr range_base = 0;
    std::size_t range_size = 0;
    if (auto range = call_driver(&DriverTable::cuMemGetAddressRange_v3020, &range_base, &range_size, *base); !range) {
        (void)imported.close();
        Error error = std::move(range).error();
        error.message = "could not check the descriptor's size against the imported allocation: " + error.message;
        return kImport.context(std::move(error));
    }
    // Bytes of the allocation from the imported base on (the base is the
    // allocation's start; anything else leaves less).
    const std::uint64_t into = *base >= range_base ? *base - range_base : range_size;
    const std::uint64_t available = into <= range_size ? range_size - into : 0;
    if (auto inside =
            detail::check_inside_allocation(kImport, descriptor.offset_bytes(), descriptor.size_bytes(), available);
        !inside) {
        (void)imported.close();
        return std::move(inside).error();
    }
    return imported;
}

void ImportedIpcMemory::Held::count_in() noexcept {
    const int device = context.empty() ? -1 : static_cast<int>(context.device());
    const std::uintptr_t address = static_cast<std::uintptr_t>(base + offset);
    ledger = detail::ledger_open(MemoryKind::IpcOpened, device, size, address);
    listed = detail::import_open(LiveImport{ImportKind::IpcMemory, device, address, size});
}

Result<void> ImportedIpcMemory::suspend() {
    constexpr detail::Operation kSuspend{"ImportedIpcMemory::suspend"};
    if (empty()) return kSuspend.invalid("nothing is imported");
    Held& held = held_.get();
    if (held.suspended) return kSuspend.invalid("already suspended");
    Result<void> closed = ok();
    {
        detail::ContextScope scope(held.context);
        if (!scope.status()) return kSuspend.context(scope.status().error());
        closed = call_driver(&DriverTable::cuIpcCloseMemHandle_v4010, held.base);
        if (!closed) return kSuspend.context(scope.finish(std::move(closed)).error());
        // Closed even if the caller's context cannot be put back: recorded
        // below before that error goes back.
        closed = scope.finish(std::move(closed));
    }
    // The handle stays claimed in its context: no other import of it can
    // take the place resume() reopens.
    held.base = 0;
    held.suspended = true;
    held.ledger.close();
    held.listed.close();
    if (!closed) return kSuspend.context(std::move(closed).error());
    return ok();
}

Result<void> ImportedIpcMemory::resume() {
    constexpr detail::Operation kResume{"ImportedIpcMemory::resume"};
    if (empty() || !held_->suspended) return kResume.invalid("not suspended (suspend() first)");
    Held& held = held_.get();
    Result<CUdeviceptr> base = CUdeviceptr{0};
    Result<void> restored = ok();
    {
        detail::ContextScope scope(held.context);
        if (!scope.status()) return kResume.context(scope.status().error());
        base = import_handle(held.handle);
        if (!base) return kResume.context(scope.finish(std::move(base)).error());
        // Open even if the caller's context cannot be put back: recorded
        // below before that error goes back.
        restored = scope.finish(ok());
    }
    held.base = *base;
    held.suspended = false;
    held.count_in();
    if (!restored) return kResume.context(std::move(restored).error());
    return ok();
}

Result<void> ImportedIpcMemory::Held::release() {
    if (suspended) {  // closed already: only the claim on the handle is left
        if (context.handle() != nullptr) import_record().release({context.handle(), handle.to_bytes()});
        *this = Held{};
        return ok();
    }
    const CUcontext key_context = context.handle();  // the record's key; release_into drops the reference
    return context.release_into([this] { return call_driver(&DriverTable::cuIpcCloseMemHandle_v4010, base); },
                                [this, key_context] {
                                    // The handle is imported in the context until the driver has closed
                                    // it: only then may another import of it go ahead.
                                    if (key_context != nullptr) import_record().release({key_context, handle.to_bytes()});
                                    *this = Held{};
                                });
}

void ImportedIpcMemory::Held::abandon() noexcept {
    if (context.handle() != nullptr) import_record().release({context.handle(), handle.to_bytes()});
}

}  // namespace cudyn
