// cudyn — the driver's opaque 64-byte inter-process handles as values:
// IpcMemoryHandle (cuIpcGetMemHandle), IpcEventHandle (cuIpcGetEventHandle) and
// FabricHandle (cuMemExportToShareableHandle with CU_MEM_HANDLE_TYPE_FABRIC).
//
// They are plain bytes, meaningful only to the driver of another process:
// to_bytes() / from_bytes() carry them anywhere. What a receiver also needs
// (which part of the allocation, who exported it, how large it is) travels in
// the descriptors built on them (ipc_memory.hpp, ipc_event.hpp,
// physical_memory_sharing.hpp).
#pragma once

#include "cudyn/core/result.hpp"

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace cudyn {

template <typename CuHandle>
class IpcHandle {
public:
    static constexpr std::size_t kSize = sizeof(CuHandle);
    static_assert(kSize == CU_IPC_HANDLE_SIZE, "the driver's inter-process handles are 64 bytes");
    using Bytes = std::array<std::uint8_t, kSize>;

    IpcHandle() noexcept = default;  // all zero bytes: no handle
    explicit IpcHandle(const CuHandle& handle) noexcept : handle_(handle) {}

    static IpcHandle from_bytes(const Bytes& bytes) noexcept {
        IpcHandle handle;
        std::memcpy(&handle.handle_, bytes.data(), kSize);
        return handle;
    }
    // InvalidArgument unless `size` is exactly kSize.
    static Result<IpcHandle> from_bytes(const void* data, std::size_t size) {
        if (data == nullptr) return Error::invalid_argument("IpcHandle::from_bytes: null data");
        if (size != kSize)
            return Error::invalid_argument("IpcHandle::from_bytes: " + std::to_string(size) +
                                           " bytes given, a handle is " + std::to_string(kSize));
        IpcHandle handle;
        std::memcpy(&handle.handle_, data, kSize);
        return handle;
    }

    Bytes to_bytes() const noexcept {
        Bytes bytes;
        std::memcpy(bytes.data(), &handle_, kSize);
        return bytes;
    }
    const CuHandle& to_cu() const noexcept { return handle_; }
    // Where a driver call (cuIpcGetMemHandle, ...) writes the handle, so that
    // an exporter fills the value its caller receives instead of copying the
    // 64 bytes it has just been handed.
    CuHandle* driver_output() noexcept { return &handle_; }

    friend bool operator==(const IpcHandle& a, const IpcHandle& b) noexcept {
        return std::memcmp(&a.handle_, &b.handle_, kSize) == 0;
    }
    friend bool operator!=(const IpcHandle& a, const IpcHandle& b) noexcept { return !(a == b); }

private:
    CuHandle handle_{};  // the driver's own struct (64 opaque bytes)
};

using IpcMemoryHandle = IpcHandle<CUipcMemHandle>;
using IpcEventHandle = IpcHandle<CUipcEventHandle>;
using FabricHandle = IpcHandle<CUmemFabricHandle>;

}  // namespace cudyn
