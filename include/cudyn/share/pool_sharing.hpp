// cudyn — sharing a memory pool and pointers from it with another process on
// the same machine: the pool as a POSIX file descriptor
// (cuMemPoolExportToShareableHandle), each pointer as a descriptor of the
// driver's 64-byte export data (cuMemPoolExportPointer) with the part shared
// and the exporter.
//
//     // exporter: the pool must be created shareable
//     auto pool = cudyn::MemoryPool::create(cudyn::PoolProperties::device(0)
//                                               .with_handle_types(cudyn::HandleType::PosixFileDescriptor));
//     auto buffer = cudyn::StreamOrderedBuffer<float>::allocate(*pool, n, stream);
//     CUDYN_TRY(cudyn::send_descriptor(channel, *cudyn::export_pool_fd(*pool)));   // descriptor_transfer.hpp
//     auto shared = cudyn::export_pool_pointer(*pool, *buffer);           // 128 bytes, send them anyhow
//     // importer
//     auto imported = cudyn::receive_pool_fd(channel).and_then(cudyn::import_pool_fd);
//     auto memory = cudyn::import_pool_pointer(*imported, *received);    // an ImportedPoolMemory
//
// Order. The importer may use the memory only once the exporter's
// allocation has completed on its stream, and must free its import before
// the exporter frees the allocation: order both with an IpcEvent
// (ipc_event.hpp). ImportedPoolMemory frees its import with cuMemFree after
// waiting for the work of its context (cuMemFree itself does not wait for
// work on pool memory), as closing a legacy IPC handle does.
//
// Checked before the driver, as InvalidArgument: malformed descriptors, a
// descriptor or pool exported by this very process, and a pointer descriptor
// from a pool other than the one given (each exported pool carries the
// exporter's identity and the pool's, and an imported pool remembers them).
#pragma once

#include "cudyn/memory/device_span.hpp"
#include "cudyn/channel/file_descriptor.hpp"
#include "cudyn/share/ipc_handle.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"
#include "cudyn/detail/unique_handle.hpp"

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace cudyn {

namespace detail {
template <typename Record>
struct WireLayout;  // a record's byte layout, private to the library
}  // namespace detail

// The driver's export data of one pool allocation, as a value.
using PoolPointerHandle = IpcHandle<CUmemPoolPtrExportData>;

// What travels with a pool's descriptor: 48 bytes.
struct PoolInfo {
    static constexpr std::size_t kSerializedSize = 48;
    using Bytes = std::array<std::uint8_t, kSerializedSize>;
    PoolOrigin origin;
    std::int32_t device = 0;  // the pool's device
    // InvalidArgument naming the field: a zero pid, token or pool id, a negative device.
    Result<void> validate() const;
    Bytes to_bytes() const noexcept;
    static Result<PoolInfo> from_bytes(const void* data, std::size_t size);
};

// A pool exported as a file descriptor, with what the importer checks.
struct PoolFdDescriptor {
    FileDescriptor fd;
    PoolInfo info;
};

// cuMemPoolExportToShareableHandle(POSIX_FILE_DESCRIPTOR). InvalidArgument for
// an empty pool or one created without HandleType::PosixFileDescriptor, or a
// pool that was itself imported; NotSupported on Windows.
Result<PoolFdDescriptor> export_pool_fd(const MemoryPool& pool);
// cuMemPoolImportFromShareableHandle: an owned MemoryPool that remembers its
// origin. InvalidArgument for a pool this process exported. The descriptor is
// closed when this returns, whatever happened.
Result<MemoryPool> import_pool_fd(PoolFdDescriptor exported);

// A pool exported as a fabric handle (pools created with HandleType::Fabric),
// for peers on other nodes of an NVLink domain: 112 bytes, send them
// anyhow. Fabric sharing needs an IMEX channel: probe_fabric_support
// (physical_memory_sharing.hpp) says whether this machine has one.
class PoolFabricDescriptor {
public:
    static constexpr std::size_t kSerializedSize = 112;
    using Bytes = std::array<std::uint8_t, kSerializedSize>;
    static Result<PoolFabricDescriptor> from_bytes(const void* data, std::size_t size);
    Bytes to_bytes() const noexcept;
    const PoolInfo& info() const noexcept { return info_; }
    const FabricHandle& handle() const noexcept { return handle_; }

private:
    friend Result<PoolFabricDescriptor> export_pool_fabric(const MemoryPool& pool);
    friend struct detail::WireLayout<PoolFabricDescriptor>;
    PoolFabricDescriptor() = default;
    PoolInfo info_;
    FabricHandle handle_;
};

// cuMemPoolExportToShareableHandle(FABRIC). InvalidArgument for an empty or
// imported pool or one created without HandleType::Fabric; NotSupported when
// the driver refuses fabric handles here (no IMEX channel).
Result<PoolFabricDescriptor> export_pool_fabric(const MemoryPool& pool);
// cuMemPoolImportFromShareableHandle(FABRIC): an owned MemoryPool that
// remembers its origin. InvalidArgument for a pool this process exported;
// NotSupported where the driver refuses fabric handles.
Result<MemoryPool> import_pool_fabric(const PoolFabricDescriptor& descriptor);

// One shared part of a pool allocation: 128 bytes.
class PoolPointerDescriptor {
public:
    static constexpr std::size_t kSerializedSize = 128;
    using Bytes = std::array<std::uint8_t, kSerializedSize>;

    // Parses bytes written by to_bytes(): InvalidArgument naming the problem.
    static Result<PoolPointerDescriptor> from_bytes(const void* data, std::size_t size);
    Bytes to_bytes() const noexcept;

    const PoolOrigin& origin() const noexcept { return origin_; }
    const PoolPointerHandle& handle() const noexcept { return handle_; }
    std::uint64_t allocation_size_bytes() const noexcept { return allocation_size_; }
    std::uint64_t offset_bytes() const noexcept { return offset_; }  // of the shared part in the allocation
    std::uint64_t size_bytes() const noexcept { return size_; }      // of the shared part

private:
    friend Result<PoolPointerDescriptor> export_pool_pointer(const MemoryPool& pool, CUdeviceptr address,
                                                             std::size_t bytes);
    friend struct detail::WireLayout<PoolPointerDescriptor>;
    PoolPointerDescriptor() = default;
    PoolOrigin origin_;
    std::uint64_t allocation_size_ = 0;
    std::uint64_t offset_ = 0;
    std::uint64_t size_ = 0;
    PoolPointerHandle handle_;
};

// Shares [address, address + bytes) of an allocation from `pool` (a pool
// created shareable in this process): the allocation is found with
// cuMemGetAddressRange, checked to come from `pool`
// (CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE), and exported with
// cuMemPoolExportPointer. InvalidArgument for an empty or unexported-able
// pool, one not exported yet (export_pool_fd / export_pool_fabric first, as
// the driver requires), a zero size, a range past the allocation or memory
// from another pool.
Result<PoolPointerDescriptor> export_pool_pointer(const MemoryPool& pool, CUdeviceptr address, std::size_t bytes);
template <typename T>
Result<PoolPointerDescriptor> export_pool_pointer(const MemoryPool& pool, DeviceSpan<T> part) {
    return export_pool_pointer(pool, part.device_address(), part.size_bytes());
}
template <typename T>
Result<PoolPointerDescriptor> export_pool_pointer(const MemoryPool& pool, const StreamOrderedBuffer<T>& buffer) {
    return export_pool_pointer(pool, buffer.device_address(), buffer.size_bytes());
}

// The importer's mapping of another process's pool allocation, freed by
// free() or the destructor: in the context it was imported in, once that
// context's work is done (cuCtxSynchronize, then cuMemFree).
class ImportedPoolMemory {
public:
    ImportedPoolMemory() noexcept = default;  // empty

    // The shared part: where the device sees it and its size.
    CUdeviceptr device_address() const noexcept { return owner_.get().base + owner_.get().offset; }
    std::size_t size_bytes() const noexcept { return owner_.get().size; }
    bool empty() const noexcept { return owner_.empty(); }
    // The shared part as elements: InvalidArgument unless its bytes are whole,
    // aligned elements of T.
    template <typename T>
    Result<DeviceSpan<T>> device_span_as() const {
        if (empty()) return Error::invalid_argument("ImportedPoolMemory::device_span_as: the import is empty");
        return DeviceSpan<T>::from_bytes(device_address(), size_bytes());
    }
    // Frees the import now and reports the driver's answer; on a refusal it is
    // still owned and free() may be retried.
    Result<void> free() { return owner_.release(); }

private:
    friend Result<ImportedPoolMemory> import_pool_pointer(const MemoryPool& pool,
                                                          const PoolPointerDescriptor& descriptor);
    struct Traits {
        struct State {
            CUdeviceptr base = 0;  // 0: empty
            std::size_t offset = 0;
            std::size_t size = 0;
            detail::OwnerContext context;
        };
        static bool empty(const State& state) noexcept { return state.base == 0; }
        static Result<void> release(State& state);  // cuMemFree_v2 in its context
    };
    explicit ImportedPoolMemory(Traits::State state) noexcept : owner_(std::move(state)) {}
    detail::UniqueHandle<Traits> owner_;
};

// cuMemPoolImportPointer into `pool`, the importer's MemoryPool of the same
// exported pool. InvalidArgument before the driver: an empty pool, a pool
// that was not imported, a descriptor from another pool or from this process.
Result<ImportedPoolMemory> import_pool_pointer(const MemoryPool& pool, const PoolPointerDescriptor& descriptor);

}  // namespace cudyn
