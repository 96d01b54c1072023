// cudyn — ImportedIpcMemory: another process's cuMemAlloc memory, imported
// from its IpcMemoryDescriptor (cuIpcOpenMemHandle) and closed on destruction
// (cuIpcCloseMemHandle).
//
// CUDA allows one import of a handle per context: a second import of the same
// handle in the same context, while the first ImportedIpcMemory lives, is
// InvalidArgument (drivers differ in what they answer; cudyn answers the same
// everywhere). A process never imports a handle it exported. The exporter must
// not free the memory before every importer has closed it; closing waits for
// the work of the context it was imported in, and happens in that context.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/detail/import_ticket.hpp"
#include "cudyn/detail/ledger_ticket.hpp"
#include "cudyn/detail/unique_handle.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/share/ipc_handle.hpp"
#include "cudyn/share/ipc_memory.hpp"

#include <cuda.h>

#include <cstddef>
#include <utility>

namespace cudyn {

class ImportedIpcMemory;

// Imports the memory another process exported, in the current context
// (cuIpcOpenMemHandle_v2 where the driver has it, else the CUDA 4.1 ABI),
// with CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, so that a context on another
// device than the exporter's can import it.
Result<ImportedIpcMemory> import_ipc_memory(const IpcMemoryDescriptor& descriptor);

class ImportedIpcMemory {
public:
    ImportedIpcMemory() noexcept = default;  // empty; move-only, closed (silently) on destruction

    // The shared part: where the exporter's [offset, offset + size) is mapped here.
    CUdeviceptr device_address() const noexcept { return empty() ? 0 : held_->base + held_->offset; }
    std::size_t size_bytes() const noexcept { return held_->size; }
    // The shared part as elements, checked (DeviceSpan::from_bytes): the
    // exporter's offset and size must suit T.
    template <typename T>
    Result<DeviceSpan<T>> device_span_as() const {
        return DeviceSpan<T>::from_bytes(device_address(), size_bytes());
    }
    // The same bytes, unchecked: every byte view is valid.
    DeviceSpan<std::byte> device_span() const noexcept {
        return DeviceSpan<std::byte>(device_address(), size_bytes());
    }
    // The whole imported allocation (what cuIpcCloseMemHandle takes).
    CUdeviceptr base_address() const noexcept { return held_->base; }
    std::size_t offset_bytes() const noexcept { return held_->offset; }
    bool empty() const noexcept { return held_.empty(); }

    // Closes now and reports the driver's answer; empty afterwards, or, when
    // the driver refused, still imported and unchanged (close() may be
    // retried). ok() when already empty.
    Result<void> close() { return held_.release(); }

    // Before a checkpoint of this process (CheckpointPreparation does it for
    // a set of imports): closes the memory (cuIpcCloseMemHandle, after the
    // context's work) and keeps the handle, the context and the sizes, so
    // resume() can open it again. The driver picks the address of an open,
    // so after resume() device_address() is most likely another one: every
    // pointer into the old address must be taken again. While suspended,
    // device_address() is 0 and the memory is not listed in live_imports().
    // InvalidArgument when empty or already suspended; a refused close
    // leaves it open and unchanged.
    Result<void> suspend();
    // Opens the kept handle again in the kept context. InvalidArgument when
    // not suspended; a refused open leaves it suspended (retry).
    Result<void> resume();
    bool suspended() const noexcept { return held_->suspended; }

private:
    friend Result<ImportedIpcMemory> import_ipc_memory(const IpcMemoryDescriptor& descriptor);
    struct Held {
        CUdeviceptr base = 0;  // the whole imported allocation
        std::size_t offset = 0;
        std::size_t size = 0;
        // The context it was imported in: kept, closed in, and with the
        // handle the key of the process's one-import-per-context record.
        detail::OwnerContext context;
        IpcMemoryHandle handle;
        detail::LedgerTicket ledger;
        detail::ImportTicket listed;
        bool suspended = false;  // closed for a checkpoint: base is 0, the handle and context kept

        bool empty() const noexcept { return base == 0 && !suspended; }
        // Counts the open memory in the ledger and the list of imports.
        void count_in() noexcept;
        // cuIpcCloseMemHandle in its context, then the record lets the
        // handle be imported again.
        Result<void> release();
        void abandon() noexcept;  // the record goes even when the close failed
    };
    ImportedIpcMemory(CUdeviceptr base, std::size_t offset, std::size_t size, detail::OwnerContext context,
                      const IpcMemoryHandle& handle) noexcept
        : held_(Held{base, offset, size, std::move(context), handle, {}, {}, false}) {
        held_->count_in();
    }

    detail::UniqueHandle<Held> held_;
};

}  // namespace cudyn
