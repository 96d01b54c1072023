// cudyn — ImportedIpcMemory: another process's cuMemAlloc memory, opened from its
// IpcMemoryDescriptor (cuIpcOpenMemHandle) and closed on destruction
// (cuIpcCloseMemHandle).
//
//     auto opened = cudyn::import_ipc_memory(descriptor);   // needs a current context
//     kernel_argument = opened->device_address();         // the shared part: base + offset
//
// Rules CUDA sets and import_ipc_memory() checks before calling the driver:
//   * a process never opens a handle it exported (InvalidArgument);
//   * a descriptor that failed its checks never gets here (from_bytes);
//   * one open per context per handle: a second open of the same handle in
//     the same context, while the first ImportedIpcMemory lives, is InvalidArgument
//     (drivers answer either CUDA_ERROR_ALREADY_MAPPED or a shared, reference
//     counted mapping; cudyn gives the same answer on all of them).
// The only open flag CUDA has, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, is always
// passed, so a context on another device than the exporter's can open it.
//
// The exporter must not free the memory before every importer has closed it.
// Closing waits for the work of the context it was opened in (the driver's
// cuIpcCloseMemHandle does, measured on an H100), and happens in that context
// whatever is current on the closing thread.
#pragma once

#include "cudyn/memory/device_span.hpp"
#include "cudyn/share/ipc_handle.hpp"
#include "cudyn/share/ipc_memory.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/detail/unique_handle.hpp"

#include <cuda.h>

#include <cstddef>

namespace cudyn {

class ImportedIpcMemory;

// Opens the memory another process exported, in the current context:
// cuIpcOpenMemHandle_v2 where the driver has it, else the CUDA 4.1 ABI.
Result<ImportedIpcMemory> import_ipc_memory(const IpcMemoryDescriptor& descriptor);

class ImportedIpcMemory {
public:
    ImportedIpcMemory() noexcept = default;  // empty; move-only, closed (silently) on destruction

    // The shared part: where the exporter's [offset, offset + size) is mapped here.
    CUdeviceptr device_address() const noexcept { return empty() ? 0 : state().base + state().offset; }
    std::size_t size_bytes() const noexcept { return state().size; }
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
    // The whole opened allocation (what cuIpcCloseMemHandle takes).
    CUdeviceptr base_address() const noexcept { return state().base; }
    std::size_t offset_bytes() const noexcept { return state().offset; }
    bool empty() const noexcept { return owner_.empty(); }

    // Closes now and reports the driver's answer; empty afterwards, or, when
    // the driver refused, still open and unchanged (close() may be retried).
    // ok() when already empty.
    Result<void> close() { return owner_.release(); }

private:
    friend Result<ImportedIpcMemory> import_ipc_memory(const IpcMemoryDescriptor& descriptor);
    struct Traits {
        struct State {
            CUdeviceptr base = 0;  // the whole opened allocation
            std::size_t offset = 0;
            std::size_t size = 0;
            // The context it was opened in: kept, closed in, and with the
            // handle the key of the process's one-open-per-context record.
            detail::OwnerContext context;
            IpcMemoryHandle handle;
        };
        static bool empty(const State& state) noexcept { return state.base == 0; }
        // cuIpcCloseMemHandle in its context, then the record lets the
        // handle be opened again.
        static Result<void> release(State& state);
        static void abandon(State& state) noexcept;  // the record goes even when the close failed
    };
    ImportedIpcMemory(CUdeviceptr base, std::size_t offset, std::size_t size, detail::OwnerContext context,
              const IpcMemoryHandle& handle) noexcept
        : owner_(Traits::State{base, offset, size, std::move(context), handle}) {}
    const Traits::State& state() const noexcept { return owner_.get(); }

    detail::UniqueHandle<Traits> owner_;
};

}  // namespace cudyn
