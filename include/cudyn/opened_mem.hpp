// cudyn — OpenedMem: another process's cuMemAlloc memory, opened from its
// IpcMemDescriptor (cuIpcOpenMemHandle) and closed on destruction
// (cuIpcCloseMemHandle).
//
//     auto opened = cudyn::open_ipc_memory(descriptor);   // needs a current context
//     kernel_argument = opened->device_address();         // the shared part: base + offset
//
// Rules CUDA sets and open_ipc_memory() checks before calling the driver:
//   * a process never opens a handle it exported (InvalidArgument);
//   * a descriptor that failed its checks never gets here (from_bytes);
//   * one open per context per handle: a second open of the same handle in
//     the same context, while the first OpenedMem lives, is InvalidArgument
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

#include "cudyn/device_span.hpp"
#include "cudyn/ipc_handle.hpp"
#include "cudyn/ipc_memory.hpp"
#include "cudyn/owner_context.hpp"
#include "cudyn/result.hpp"

#include <cuda.h>

#include <cstddef>

namespace cudyn {

class OpenedMem;

// Opens the memory another process exported, in the current context:
// cuIpcOpenMemHandle_v2 where the driver has it, else the CUDA 4.1 ABI.
Result<OpenedMem> open_ipc_memory(const IpcMemDescriptor& descriptor);

class OpenedMem {
public:
    OpenedMem() noexcept = default;  // empty
    OpenedMem(OpenedMem&& other) noexcept;
    OpenedMem& operator=(OpenedMem&& other) noexcept;
    OpenedMem(const OpenedMem&) = delete;
    OpenedMem& operator=(const OpenedMem&) = delete;
    ~OpenedMem();  // closes, silently

    // The shared part: where the exporter's [offset, offset + size) is mapped here.
    CUdeviceptr device_address() const noexcept { return base_ == 0 ? 0 : base_ + offset_; }
    std::size_t size_bytes() const noexcept { return size_; }
    // The shared part as elements, checked (DeviceSpan::from_bytes): the
    // exporter's offset and size must suit T.
    template <typename T>
    Result<DeviceSpan<T>> device_span_as() const {
        return DeviceSpan<T>::from_bytes(device_address(), size_);
    }
    // The same bytes, unchecked: every byte view is valid.
    DeviceSpan<std::byte> device_span() const noexcept {
        return DeviceSpan<std::byte>(device_address(), size_);
    }
    // The whole opened allocation (what cuIpcCloseMemHandle takes).
    CUdeviceptr base_address() const noexcept { return base_; }
    std::size_t offset_bytes() const noexcept { return offset_; }
    bool empty() const noexcept { return base_ == 0; }

    // Closes now and reports the driver's answer; empty afterwards, or, when
    // the driver refused, still open and unchanged (close() may be retried).
    // ok() when already empty.
    Result<void> close();

private:
    friend Result<OpenedMem> open_ipc_memory(const IpcMemDescriptor& descriptor);
    OpenedMem(CUdeviceptr base, std::size_t offset, std::size_t size, detail::OwnerContext context,
              const IpcMemHandle& handle) noexcept
        : base_(base), offset_(offset), size_(size), context_(std::move(context)), handle_(handle) {}

    void forget() noexcept;  // lets go without the driver (after a close, or a destructor's last resort)

    CUdeviceptr base_ = 0;
    std::size_t offset_ = 0;
    std::size_t size_ = 0;
    // The context it was opened in: kept, closed in, and with handle_ its open-once key.
    detail::OwnerContext context_;
    IpcMemHandle handle_;
};

}  // namespace cudyn
