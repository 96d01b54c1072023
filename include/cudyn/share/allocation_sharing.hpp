// cudyn — sharing any shareable GPU allocation with another process from its
// device address alone: the library finds what kind of memory it is and
// picks the handle, and the importer imports it without knowing which kind
// it was.
//
// The kinds, and what each shares:
//   * cuMemAlloc memory: its legacy IPC handle (ipc_memory.hpp);
//   * VMM memory created with a shareable handle type: the physical
//     allocation mapped at the address (one mapping at a time), as a POSIX
//     file descriptor, or as a fabric handle for memory created with only
//     the fabric type where this machine has fabric (physical_memory_sharing.hpp);
//   * memory from a pool created shareable: the pool and the pointer
//     (pool_sharing.hpp).
// A POSIX file descriptor is preferred where memory has both types: the
// channel is a Unix socket, so the importer is on this machine. Each kind
// carries the offset of the address in its allocation, so the importer's
// device_address() is the exporter's address.
//
// The exporter keeps the memory alive until the importer has closed its
// import, and pool memory must have been allocated (its stream reached the
// allocation) before the importer uses it: order both with an IpcEvent.
#pragma once

#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/detail/record_access.hpp"
#include "cudyn/detail/unique_handle.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/share/imported_ipc_memory.hpp"
#include "cudyn/share/ipc_memory.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"
#include "cudyn/share/pool_sharing.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/mapped_range.hpp"

#include <cuda.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <variant>

namespace cudyn {

// Which kind of allocation was shared (the wire's kind tag).
enum class AllocationKind : std::uint32_t {
    LegacyIpc = 1,  // cuMemAlloc memory: a legacy IPC handle
    Vmm = 2,        // cuMemCreate memory mapped here: a POSIX file descriptor or a fabric handle
    Pool = 3,       // memory from a shareable pool: the pool and the pointer
};
// "legacy_ipc", "vmm", "pool".
const char* to_string(AllocationKind kind) noexcept;

class ImportedAllocation;

namespace detail {

// What an AllocationDescriptor carries, one type per kind and handle type.
// Each type's wire form and import are its own functions
// (src/share/allocation_parts.cpp); a new kind is a new type here, in
// AllocationParts, and its functions there.
struct LegacyIpcParts {
    static constexpr AllocationKind kKind = AllocationKind::LegacyIpc;
    static constexpr HandleType kHandleType = HandleType::None;
    IpcMemoryDescriptor memory;
};
struct VmmFdParts {
    static constexpr AllocationKind kKind = AllocationKind::Vmm;
    static constexpr HandleType kHandleType = HandleType::PosixFileDescriptor;
    MemoryFdDescriptor memory;
};
struct VmmFabricParts {
    static constexpr AllocationKind kKind = AllocationKind::Vmm;
    static constexpr HandleType kHandleType = HandleType::Fabric;
    MemoryFabricDescriptor memory;
};
struct PoolFdParts {
    static constexpr AllocationKind kKind = AllocationKind::Pool;
    static constexpr HandleType kHandleType = HandleType::PosixFileDescriptor;
    PoolFdDescriptor pool;
    PoolPointerDescriptor pointer;
};
struct PoolFabricParts {
    static constexpr AllocationKind kKind = AllocationKind::Pool;
    static constexpr HandleType kHandleType = HandleType::Fabric;
    PoolFabricDescriptor pool;
    PoolPointerDescriptor pointer;
};
using AllocationParts = std::variant<LegacyIpcParts, VmmFdParts, VmmFabricParts, PoolFdParts, PoolFabricParts>;

}  // namespace detail

// What the exporter shares: the kind's descriptors, a file descriptor to
// pass (SCM_RIGHTS) for the POSIX kinds, which part of the allocation, and
// who exported it. Move-only: it owns the file descriptor it carries.
class AllocationDescriptor {
public:
    AllocationKind kind() const noexcept {
        return std::visit([](const auto& parts) { return parts.kKind; }, fields_.parts);
    }
    // PosixFileDescriptor or Fabric for VMM and pool memory; None for a legacy handle.
    HandleType handle_type() const noexcept {
        return std::visit([](const auto& parts) { return parts.kHandleType; }, fields_.parts);
    }
    std::uint64_t offset_bytes() const noexcept { return fields_.offset; }  // of the shared part in its allocation
    std::uint64_t size_bytes() const noexcept { return fields_.size; }      // of the shared part
    // Of the allocation (for VMM memory, of the mapping the address lies in).
    std::uint64_t allocation_size_bytes() const noexcept { return fields_.allocation_size; }
    // Whether a file descriptor travels with it (the POSIX kinds).
    bool carries_file_descriptor() const noexcept { return handle_type() == HandleType::PosixFileDescriptor; }
    // The process that exported it (its pid there); true in that very process.
    std::uint64_t exporter_pid() const noexcept { return fields_.exporter.pid(); }
    bool exported_by_this_process() const noexcept { return fields_.exporter.is_this_process(); }

private:
    friend struct detail::RecordAccess;
    struct Fields {
        detail::AllocationParts parts;
        detail::ExporterIdentity exporter;
        std::uint64_t allocation_size = 0;
        std::uint64_t offset = 0;
        std::uint64_t size = 0;
    };
    AllocationDescriptor(detail::AllocationParts parts, detail::ExporterIdentity exporter,
                         std::uint64_t allocation_size, std::uint64_t offset, std::uint64_t size) noexcept
        : fields_{std::move(parts), exporter, allocation_size, offset, size} {}
    Fields fields_;
};

// Exports [address, address + bytes) of the allocation `address` lies in (a
// current context is needed for cuMemAlloc memory). InvalidArgument, before
// the driver, for a null address, a zero size or a range that wraps; after
// asking it, for an address the driver does not know (not GPU memory: plain
// host memory, a VMM reservation with nothing mapped there) and a range
// running past the allocation (for VMM memory, past the mapping).
// NotSupported, naming why, for memory that has no inter-process handle:
// managed memory, pinned, mapped or registered host memory, VMM memory or a
// pool created without a shareable handle type (a device's default pool
// among them), and memory this process imported from another.
Result<AllocationDescriptor> export_allocation(CUdeviceptr address, std::size_t bytes);
// From `address` to the end of its allocation (of its mapping, for VMM memory).
Result<AllocationDescriptor> export_allocation(CUdeviceptr address);
template <typename T>
Result<AllocationDescriptor> export_allocation(DeviceSpan<T> part) {
    return export_allocation(part.device_address(), part.size_bytes());
}

// The tag of the channel message send_descriptor() writes.
inline constexpr std::uint32_t kAllocationMessageTag = 0x43555341;  // "CUSA"

// One message: a versioned record (kind, handle type, exporter, offset,
// sizes), then the kind's own records, with the file descriptor riding
// along for the POSIX kinds. The file descriptor stays open here.
Result<void> send_descriptor(FdChannel& channel, const AllocationDescriptor& descriptor,
                             std::chrono::milliseconds timeout = kDefaultChannelTimeout);
// The other side. InvalidArgument for a message with another tag, a record
// that fails its checks (magic, version, length, an unknown kind or handle
// type, records that disagree with the message's record about the part or
// the exporter), or a file descriptor missing where the kind needs one or
// present where it needs none (nothing stays open on failure); the channel's
// errors otherwise.
Result<AllocationDescriptor> receive_allocation(FdChannel& channel,
                                                std::chrono::milliseconds timeout = kDefaultChannelTimeout);

// Imports what another process exported, in the current context:
//   * a legacy handle: import_ipc_memory (imported_ipc_memory.hpp);
//   * VMM memory: import_memory_fd / import_memory_fabric, mapped whole
//     read-write for the current context's device;
//   * pool memory: import_pool_fd / import_pool_fabric, then import_pool_pointer.
// `descriptor` is left as it was (its file descriptor is duplicated for the
// import), so it may be imported again, e.g. in another context.
// InvalidArgument for a descriptor this very process exported (use the
// memory directly).
Result<ImportedAllocation> import_allocation(const AllocationDescriptor& descriptor);

// What import_allocation imported, closed by close() or the destructor, in
// the order the driver needs: the legacy handle closed (after the context's
// work); the VMM mapping unmapped after the device is waited for, then the
// imported allocation released and the range freed (MappedRange); the
// imported pool pointer freed after the context's work, then the imported
// pool destroyed.
class ImportedAllocation {
public:
    ImportedAllocation() noexcept = default;  // empty; move-only

    AllocationKind kind() const noexcept { return held_->kind; }
    // Where the exporter's address is mapped here, and the shared part's size.
    CUdeviceptr device_address() const noexcept { return empty() ? 0 : held_->address; }
    std::size_t size_bytes() const noexcept { return empty() ? 0 : held_->size; }
    // The shared part as bytes (every byte view is valid) or as elements
    // (checked: the exporter's offset and size must suit T).
    DeviceSpan<std::byte> device_span() const noexcept { return DeviceSpan<std::byte>(device_address(), size_bytes()); }
    template <typename T>
    Result<DeviceSpan<T>> device_span_as() const {
        if (empty()) return Error::invalid_argument("ImportedAllocation::device_span_as: nothing is imported");
        return DeviceSpan<T>::from_bytes(device_address(), size_bytes());
    }
    bool empty() const noexcept { return held_.empty(); }

    // Closes now and reports the first refusal; whatever the driver still
    // holds stays held here (close() may be retried). ok() when empty.
    Result<void> close() { return held_.release(); }

private:
    friend struct detail::RecordAccess;  // each kind's import builds one (RecordAccess::make)
    // Dropped unreleased, members go last to first: the imported memory
    // before the pool it came from.
    struct Held {
        AllocationKind kind = AllocationKind::LegacyIpc;
        CUdeviceptr address = 0;
        std::size_t size = 0;
        MemoryPool pool;                 // pool kinds: the imported pool
        ImportedPoolMemory pool_memory;  // pool kinds: the imported pointer
        MappedRange mapping;             // VMM kinds: holds the imported memory and the range
        bool mapped = false;             // until mapping.unmap() gave everything back (it may stop half-way)
        ImportedIpcMemory ipc_memory;    // the legacy kind

        bool empty() const noexcept { return ipc_memory.empty() && !mapped && pool_memory.empty() && pool.empty(); }
        // Closes in order, stopping at the first refusal with the rest held.
        Result<void> release();
    };
    explicit ImportedAllocation(ImportedIpcMemory memory) noexcept {
        held_->kind = AllocationKind::LegacyIpc;
        held_->address = memory.device_address();
        held_->size = memory.size_bytes();
        held_->ipc_memory = std::move(memory);
    }
    ImportedAllocation(MappedRange mapping, std::uint64_t offset, std::size_t size) noexcept {
        held_->kind = AllocationKind::Vmm;
        held_->address = mapping.device_address() + static_cast<CUdeviceptr>(offset);
        held_->size = size;
        held_->mapping = std::move(mapping);
        held_->mapped = true;
    }
    ImportedAllocation(MemoryPool pool, ImportedPoolMemory memory) noexcept {
        held_->kind = AllocationKind::Pool;
        held_->address = memory.device_address();
        held_->size = memory.size_bytes();
        held_->pool = std::move(pool);
        held_->pool_memory = std::move(memory);
    }
    detail::UniqueHandle<Held> held_;
};

}  // namespace cudyn
