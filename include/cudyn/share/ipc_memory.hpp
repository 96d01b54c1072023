// cudyn — sharing cuMemAlloc memory with another process through the legacy
// IPC handle (cuIpcGetMemHandle): the exporter's side.
//
//     auto buffer = cudyn::DeviceBuffer<float>::allocate(n);
//     auto shared = cudyn::export_ipc_memory(*buffer);              // Result<IpcMemoryDescriptor>
//     auto bytes = shared->to_bytes();                              // 120 bytes, send them anyhow
//     // ... in the other process:
//     auto received = cudyn::IpcMemoryDescriptor::from_bytes(bytes.data(), bytes.size());
//     auto opened = cudyn::import_ipc_memory(*received);              // imported_ipc_memory.hpp
//
// The driver's handle names the whole base allocation, so the descriptor
// carries which part is shared (offset and size) and who exported it (process
// id plus a per-process random token, so that a process never opens its own
// handle, which CUDA forbids, even across pid namespaces).
//
// Only cuMemAlloc memory has a legacy handle; VMM memory is shared with
// shareable handles (physical_memory_sharing.hpp). The exporter must keep the memory
// alive until every importer has closed it (freeing it first is undefined
// behaviour in CUDA).
#pragma once

#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/share/ipc_handle.hpp"
#include "cudyn/core/result.hpp"

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace cudyn {

namespace detail {
struct IpcMemoryExport;  // ipc_memory.cpp: the only maker of exported descriptors
template <typename Record>
struct WireLayout;  // a record's byte layout, private to the library
}  // namespace detail

class IpcMemoryDescriptor {
public:
    static constexpr std::size_t kSerializedSize = 120;
    using Bytes = std::array<std::uint8_t, kSerializedSize>;

    // Parses bytes written by to_bytes(): InvalidArgument naming the problem
    // (length, magic, version, offset/size outside the allocation, ...).
    static Result<IpcMemoryDescriptor> from_bytes(const void* data, std::size_t size);
    Bytes to_bytes() const noexcept;

    const IpcMemoryHandle& handle() const noexcept { return handle_; }
    std::uint64_t offset_bytes() const noexcept { return offset_; }  // of the shared part in the allocation
    std::uint64_t size_bytes() const noexcept { return size_; }      // of the shared part
    std::uint64_t allocation_size_bytes() const noexcept { return allocation_size_; }
    std::uint64_t exporter_pid() const noexcept { return exporter_pid_; }
    // True in the process that exported it (where opening is refused).
    bool exported_by_this_process() const noexcept;

private:
    friend struct detail::IpcMemoryExport;
    friend struct detail::WireLayout<IpcMemoryDescriptor>;
    // Only the exporter can name the key, so only it reaches the public
    // constructor below, which is public so that a Result can build the
    // descriptor in place (the driver then writes the handle straight into
    // the caller's Result, with no copy of the finished record).
    struct ExportKey {
        explicit ExportKey() = default;
    };

public:
    IpcMemoryDescriptor(ExportKey, std::uint64_t offset, std::uint64_t size, std::uint64_t allocation_size,
                     std::uint64_t exporter_pid, std::uint64_t exporter_token) noexcept
        : offset_(offset), size_(size), allocation_size_(allocation_size), exporter_pid_(exporter_pid),
          exporter_token_(exporter_token) {}

private:
    IpcMemoryDescriptor() = default;

    IpcMemoryHandle handle_;
    std::uint64_t offset_ = 0;
    std::uint64_t size_ = 0;
    std::uint64_t allocation_size_ = 0;
    std::uint64_t exporter_pid_ = 0;
    std::uint64_t exporter_token_ = 0;
};

// Shares [address, address + bytes) of a cuMemAlloc allocation of the current
// context: the base allocation is found with cuMemGetAddressRange, its handle
// taken with cuIpcGetMemHandle. InvalidArgument for a null address, a zero
// size or a range running past the allocation; the driver's error (with a
// hint) for memory that is not cuMemAlloc memory.
Result<IpcMemoryDescriptor> export_ipc_memory(CUdeviceptr address, std::size_t bytes);
// The elements of `part`, as above.
template <typename T>
Result<IpcMemoryDescriptor> export_ipc_memory(DeviceSpan<T> part) {
    return export_ipc_memory(part.device_address(), part.size_bytes());
}

namespace detail {
// The whole allocation at `base` of `bytes`, known to be a base allocation:
// one driver call (cuIpcGetMemHandle). InvalidArgument for an empty buffer.
Result<IpcMemoryDescriptor> export_ipc_allocation(CUdeviceptr base, std::size_t bytes);
}  // namespace detail

// The whole buffer: a DeviceBuffer is a base allocation, so this is one driver
// call (no cuMemGetAddressRange). InvalidArgument for an empty buffer.
template <typename T>
Result<IpcMemoryDescriptor> export_ipc_memory(const DeviceBuffer<T>& buffer) {
    return detail::export_ipc_allocation(buffer.device_address(), buffer.size_bytes());
}

}  // namespace cudyn
