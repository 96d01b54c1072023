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
// The export path is inline, here: on driver 580 cuIpcGetMemHandle answers in
// ~35 ns, and the call into the library and back was about two thirds of what
// cudyn added (median +2.3 ns before, +0.8 ns inline, on an H200; see
// docs/ARCHITECTURE.md). Its failures are built out of line.
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
#include "cudyn/driver_call.hpp"
#include "cudyn/ipc_handle.hpp"
#include "cudyn/process_identity.hpp"
#include "cudyn/result.hpp"

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

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
    // The failures, out of line and cold (ipc_memory.cpp).
    CUDYN_DETAIL_COLD static Result<IpcMemDescriptor> empty_buffer_error();
    CUDYN_DETAIL_COLD static Result<IpcMemDescriptor> bad_range_error(CUdeviceptr address, std::size_t bytes,
                                                                      std::uint64_t offset,
                                                                      std::uint64_t allocation_size);
    // Replaces `exported` with the driver's refusal, plus what usually causes it.
    CUDYN_DETAIL_COLD static void fail_export(Result<IpcMemDescriptor>& exported, Error error, CUdeviceptr base);

    IpcMemHandle handle_;
    std::uint64_t offset_ = 0;
    std::uint64_t size_ = 0;
    std::uint64_t allocation_size_ = 0;
    std::uint64_t exporter_pid_ = 0;
    std::uint64_t exporter_token_ = 0;
};

// ---- the export path ---------------------------------------------------------------------

inline Result<IpcMemDescriptor> IpcMemDescriptor::export_range(CUdeviceptr address, std::size_t bytes) {
    if (address == 0 || bytes == 0) return bad_range_error(address, bytes, 0, 0);
    CUdeviceptr base = 0;
    std::size_t allocation_size = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemGetAddressRange_v3020, &base, &allocation_size, address));
    const std::uint64_t offset = address - base;
    if (bytes > allocation_size - offset) return bad_range_error(address, bytes, offset, allocation_size);
    return make(base, allocation_size, offset, bytes);
}

inline Result<IpcMemDescriptor> IpcMemDescriptor::export_allocation(CUdeviceptr base, std::size_t bytes) {
    if (base == 0 || bytes == 0) return empty_buffer_error();
    return make(base, bytes, 0, bytes);
}

inline Result<IpcMemDescriptor> IpcMemDescriptor::make(CUdeviceptr base, std::uint64_t allocation_size,
                                                       std::uint64_t offset, std::uint64_t size) {
    const detail::ProcessIdentity self = detail::this_process();
    // Built where the caller receives it (one named result, returned on every
    // path) and handed to the driver to fill: the handle is never copied after
    // the driver wrote it. Measured on an H200: building the descriptor on the
    // stack and moving it out cost ~28 ns on top of a 34 ns cuIpcGetMemHandle
    // (reloading bytes just stored).
    Result<IpcMemDescriptor> exported(std::in_place, ExportKey{}, offset, size, allocation_size, self.pid, self.token);
    if (auto got = call_driver(&DriverTable::cuIpcGetMemHandle_v4010, exported->handle_.driver_output(), base); !got)
        fail_export(exported, std::move(got).error(), base);
    return exported;
}

}  // namespace cudyn
