// cudyn — sharing cuMemAlloc memory with another process through the legacy
// IPC handle (cuIpcGetMemHandle): the exporter's side.
//
//     auto buffer = cudyn::DeviceBuffer<float>::allocate(n);
//     auto shared = cudyn::IpcMemDescriptor::export_buffer(*buffer);   // Result<IpcMemDescriptor>
//     auto bytes = shared->to_bytes();                                  // 120 bytes, send them anyhow
//     // ... in the other process:
//     auto received = cudyn::IpcMemDescriptor::from_bytes(bytes.data(), bytes.size());
//     auto opened = cudyn::OpenedMem::open(*received);                  // opened_mem.hpp
//
// The driver's handle names the whole base allocation, so the descriptor
// carries which part is shared (offset and size) and who exported it (process
// id plus a per-process random token, so that a process never opens its own
// handle, which CUDA forbids, even across pid namespaces).
//
// Only cuMemAlloc memory has a legacy handle; VMM memory is shared with
// shareable handles (shareable_memory.hpp). The exporter must keep the memory
// alive until every importer has closed it (freeing it first is undefined
// behaviour in CUDA).
#pragma once

#include "cudyn/device_buffer.hpp"
#include "cudyn/ipc_handle.hpp"
#include "cudyn/result.hpp"

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace cudyn {

class IpcMemDescriptor {
public:
    static constexpr std::size_t kSerializedSize = 120;
    using Bytes = std::array<std::uint8_t, kSerializedSize>;

    // Shares [address, address + bytes) of a cuMemAlloc allocation of the
    // current context: the base allocation is found with cuMemGetAddressRange,
    // its handle taken with cuIpcGetMemHandle. InvalidArgument for a zero size
    // or a range running past the allocation; the driver's error (with a hint)
    // for memory that is not cuMemAlloc memory.
    static Result<IpcMemDescriptor> export_range(CUdeviceptr address, std::size_t bytes);
    // The whole buffer: a DeviceBuffer is a base allocation, so this is one
    // driver call (cuIpcGetMemHandle). InvalidArgument for an empty buffer.
    template <typename T>
    static Result<IpcMemDescriptor> export_buffer(const DeviceBuffer<T>& buffer) {
        return export_allocation(buffer.device_pointer(), buffer.bytes());
    }

    // Parses bytes written by to_bytes(): InvalidArgument naming the problem
    // (length, magic, version, offset/size outside the allocation, ...).
    static Result<IpcMemDescriptor> from_bytes(const void* data, std::size_t size);
    Bytes to_bytes() const noexcept;

    const IpcMemHandle& handle() const noexcept { return handle_; }
    std::uint64_t offset() const noexcept { return offset_; }            // of the shared part in the allocation
    std::uint64_t size() const noexcept { return size_; }                // of the shared part
    std::uint64_t allocation_size() const noexcept { return allocation_size_; }
    std::uint64_t exporter_pid() const noexcept { return exporter_pid_; }
    // True in the process that exported it (where opening is refused).
    bool exported_by_this_process() const noexcept;

private:
    // Only this class can name the key, so only make() reaches the public
    // constructor below (public so that Result can build it in place).
    struct ExportKey {
        explicit ExportKey() = default;
    };

public:
    // For make(): everything but the handle, which the driver then writes in place.
    IpcMemDescriptor(ExportKey, std::uint64_t offset, std::uint64_t size, std::uint64_t allocation_size,
                     std::uint64_t exporter_pid, std::uint64_t exporter_token) noexcept
        : offset_(offset), size_(size), allocation_size_(allocation_size), exporter_pid_(exporter_pid),
          exporter_token_(exporter_token) {}

private:
    IpcMemDescriptor() = default;
    static Result<IpcMemDescriptor> export_allocation(CUdeviceptr base, std::size_t bytes);
    static Result<IpcMemDescriptor> make(CUdeviceptr base, std::uint64_t allocation_size, std::uint64_t offset,
                                         std::uint64_t size);

    IpcMemHandle handle_;
    std::uint64_t offset_ = 0;
    std::uint64_t size_ = 0;
    std::uint64_t allocation_size_ = 0;
    std::uint64_t exporter_pid_ = 0;
    std::uint64_t exporter_token_ = 0;
};

}  // namespace cudyn
