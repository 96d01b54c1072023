// cudyn — sharing a memory pool and pointers from it with another process:
// the pool as a POSIX file descriptor or a fabric handle
// (cuMemPoolExportToShareableHandle), each pointer as a descriptor of the
// driver's export data (cuMemPoolExportPointer) with the part shared and the
// pool it comes from. The pool must be created shareable
// (PoolProperties::with_handle_types), and exported before its pointers.
//
// Order: the importer may use the memory only once the exporter's allocation
// has completed on its stream, and must free its import before the exporter
// frees the allocation; order both with an IpcEvent (ipc_event.hpp).
#pragma once

#include "cudyn/channel/file_descriptor.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/detail/import_ticket.hpp"
#include "cudyn/detail/ledger_ticket.hpp"
#include "cudyn/detail/record_access.hpp"
#include "cudyn/detail/unique_handle.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"
#include "cudyn/share/ipc_handle.hpp"

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace cudyn {

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
// origin. InvalidArgument for a pool this process exported. The file descriptor is
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
    const PoolInfo& info() const noexcept { return fields_.info; }
    const FabricHandle& handle() const noexcept { return fields_.handle; }

private:
    friend struct detail::RecordAccess;
    struct Fields {
        PoolInfo info;
        FabricHandle handle;
    };
    PoolFabricDescriptor() = default;
    Fields fields_;
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

    const PoolOrigin& origin() const noexcept { return fields_.origin; }
    const PoolPointerHandle& handle() const noexcept { return fields_.handle; }
    std::uint64_t allocation_size_bytes() const noexcept { return fields_.allocation_size; }
    std::uint64_t offset_bytes() const noexcept { return fields_.offset; }  // of the shared part in the allocation
    std::uint64_t size_bytes() const noexcept { return fields_.size; }      // of the shared part

private:
    friend struct detail::RecordAccess;
    struct Fields {
        PoolOrigin origin;
        std::uint64_t allocation_size = 0;
        std::uint64_t offset = 0;
        std::uint64_t size = 0;
        PoolPointerHandle handle;
    };
    PoolPointerDescriptor() = default;
    Fields fields_;
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
// free() or the destructor, in the context it was imported in. Two ways, as
// the program chooses:
//   * no stream named (the default): once that context's work is done
//     (cuCtxSynchronize: a free does not wait for work on pool memory), by
//     cuMemFreeAsync on the context's default stream, waited for before
//     free() returns (after a failed wait the import stays held until
//     free() is retried, which then only waits);
//   * in stream order, as a StreamOrderedBuffer is freed: once use_on() or
//     free(stream) named a stream, the free is cuMemFreeAsync on the stream
//     named last, without waiting; the mapping goes when that stream reaches
//     the free. Work on other streams that uses the import must be ordered
//     before it (events), and that stream, of the import's context, must
//     still exist when the import is freed or destroyed.
class ImportedPoolMemory {
public:
    ImportedPoolMemory() noexcept = default;  // empty

    // The shared part: where the device sees it and its size.
    CUdeviceptr device_address() const noexcept { return held_->base + held_->offset; }
    std::size_t size_bytes() const noexcept { return held_->size; }
    bool empty() const noexcept { return held_.empty(); }
    // The shared part as elements: InvalidArgument unless its bytes are whole,
    // aligned elements of T.
    template <typename T>
    Result<DeviceSpan<T>> device_span_as() const {
        if (empty()) return Error::invalid_argument("ImportedPoolMemory::device_span_as: the import is empty");
        return DeviceSpan<T>::from_bytes(device_address(), size_bytes());
    }
    // Records the stream the program's own work on the import runs on (a
    // kernel): from now on the import is freed in stream order on it.
    void use_on(StreamRef stream) noexcept {
        if (!held_.empty()) {
            held_->stream = stream.handle();
            held_->stream_ordered = true;
        }
    }
    // Whether the free goes on a stream (use_on or free(stream) named one).
    bool stream_ordered() const noexcept { return held_->stream_ordered; }
    // Frees the import now (in stream order once a stream was named) and
    // reports the driver's answer; on a refusal it is still owned and free()
    // may be retried (a free already issued is not issued again).
    Result<void> free() { return held_.release(); }
    // Frees it in stream order on `stream` (cuMemFreeAsync), without waiting.
    Result<void> free(StreamRef stream) {
        use_on(stream);
        return held_.release();
    }

private:
    friend Result<ImportedPoolMemory> import_pool_pointer(const MemoryPool& pool,
                                                          const PoolPointerDescriptor& descriptor);
    struct Held {
        CUdeviceptr base = 0;  // 0: empty
        std::size_t offset = 0;
        std::size_t size = 0;
        CUmemoryPool pool = nullptr;  // the imported pool it came from
        detail::OwnerContext context;
        CUstream stream = nullptr;    // the stream of a stream-ordered free
        bool stream_ordered = false;  // false: cuCtxSynchronize, cuMemFreeAsync on the default stream, its wait
        bool free_issued = false;     // that free was enqueued; its wait failed (a retry only waits)
        detail::LedgerTicket ledger;
        detail::ImportTicket listed;

        bool empty() const noexcept { return base == 0; }
        Result<void> release();   // cuMemFreeAsync (waited for, or on `stream`) in its context
        void abandon() noexcept;  // the pool's record of imports forgets it even when the free failed
    };
    explicit ImportedPoolMemory(Held held) noexcept : held_(std::move(held)) {}
    detail::UniqueHandle<Held> held_;
};

// cuMemPoolImportPointer into `pool`, the importer's MemoryPool of the same
// exported pool. InvalidArgument before the driver: an empty pool, a pool
// that was not imported, a descriptor from another pool or from this process.
Result<ImportedPoolMemory> import_pool_pointer(const MemoryPool& pool, const PoolPointerDescriptor& descriptor);

}  // namespace cudyn
