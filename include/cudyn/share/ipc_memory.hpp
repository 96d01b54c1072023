// cudyn — sharing cuMemAlloc memory with another process through its legacy
// IPC handle (cuIpcGetMemHandle): the exporter's side, and the descriptor that
// travels (which part of the allocation, and who exported it). The importer's
// side is imported_ipc_memory.hpp. The exporter keeps the memory alive until
// every importer has closed its import.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/detail/record_access.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/share/ipc_handle.hpp"

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace cudyn {

class IpcMemoryDescriptor {
public:
    static constexpr std::size_t kSerializedSize = 120;
    using Bytes = std::array<std::uint8_t, kSerializedSize>;

    // Parses bytes written by to_bytes(): InvalidArgument naming the problem
    // (length, magic, version, offset/size outside the allocation, ...).
    static Result<IpcMemoryDescriptor> from_bytes(const void* data, std::size_t size);
    Bytes to_bytes() const noexcept;

    const IpcMemoryHandle& handle() const noexcept { return fields_.handle; }
    std::uint64_t offset_bytes() const noexcept { return fields_.offset; }  // of the shared part in the allocation
    std::uint64_t size_bytes() const noexcept { return fields_.size; }      // of the shared part
    std::uint64_t allocation_size_bytes() const noexcept { return fields_.allocation_size; }
    std::uint64_t exporter_pid() const noexcept { return fields_.exporter.pid(); }
    // True in the process that exported it (where importing is refused).
    bool exported_by_this_process() const noexcept { return fields_.exporter.is_this_process(); }

    // The library's (only it makes a RecordKey): a blank descriptor that a
    // Result builds in place, so the export's driver call writes the handle
    // straight into the caller's Result.
    explicit IpcMemoryDescriptor(detail::RecordKey) noexcept {}

private:
    friend struct detail::RecordAccess;
    struct Fields {
        detail::ExporterIdentity exporter;
        std::uint64_t allocation_size = 0;
        std::uint64_t offset = 0;
        std::uint64_t size = 0;
        IpcMemoryHandle handle;
    };
    IpcMemoryDescriptor() = default;
    Fields fields_;
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
