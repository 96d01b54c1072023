// cudyn — sharing any shareable GPU allocation with another process, from its
// device address alone: the library finds what kind of memory it is and
// picks the handle, and the peer opens it without knowing which kind it was.
//
//     // exporter: any address inside cuMemAlloc, VMM or shareable-pool memory
//     auto shared = cudyn::export_allocation(address, bytes);   // Result<AllocationDescriptor>
//     CUDYN_TRY(cudyn::send_descriptor(channel, *shared));          // one FdChannel message
//     // the other process (a current context)
//     auto opened = cudyn::receive_allocation(channel).and_then(cudyn::import_allocation);
//     kernel_argument = opened->device_address();               // the exporter's `address`
//
// The kinds, and what each shares (the driver's answers on an H200 with
// driver 580, docs/measurements/h200-2026-11-25-batch-dmabuf-hostvmm-pointers.md):
//   * cuMemAlloc memory (CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE):
//     a legacy IPC handle (ipc_memory.hpp); the peer opens it (ImportedIpcMemory).
//   * VMM memory (cuMemRetainAllocationHandle succeeds only for it): the
//     mapped physical allocation (CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR /
//     _SIZE; RANGE_START_ADDR is the whole reservation) as a POSIX descriptor,
//     or, for memory created with only the fabric handle type, as a fabric
//     handle where probe_fabric_support says this machine has one
//     (physical_memory_sharing.hpp); the peer imports it and maps it for its device.
//   * Memory from a pool created with a shareable handle type
//     (CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE): the pool (its POSIX descriptor,
//     or its fabric handle for a fabric-only pool) and the pointer
//     (pool_sharing.hpp); the peer imports both.
// A POSIX descriptor is preferred where the memory has both types: the channel
// is a Unix socket, so the peer is on this machine, and a descriptor needs no
// IMEX channel. Each kind carries the offset of `address` inside its
// allocation, so the peer's device_address() is the exporter's address.
//
// What cannot be shared is NotSupported, naming why: managed memory, pinned,
// mapped or registered host memory, VMM memory created without a shareable
// handle type, memory from a pool without one (a device's default pool among
// them), and device memory with no handle of its own (memory this process
// opened from another). An address the driver does not know at all (plain
// malloc memory, a VMM reservation with nothing mapped there) is
// InvalidArgument: it is not GPU memory, a mistake of the caller's rather
// than something the driver lacks (the driver gives one answer for both).
//
// Descriptors travel as SCM_RIGHTS over the FdChannel, so this works between
// processes in different PID namespaces (containers): the peer never needs
// the exporter's pid to get a descriptor (no pidfd_getfd, no /proc/<pid>/fd),
// and "was this exported by me" is decided by pid *and* a random per-process
// token. Whether the driver itself opens a legacy IPC handle or a pool pointer
// in another PID namespace is the driver's business.
//
// Order, as for each kind on its own: the exporter keeps the memory alive
// until the peer has closed what it opened (the peer's ImportedAllocation frees
// an imported pool pointer before the exporter may free the allocation), and
// pool memory must have been allocated (its stream reached the allocation)
// before the peer uses it: order both with an IpcEvent.
#pragma once

#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/share/ipc_memory.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/share/imported_ipc_memory.hpp"
#include "cudyn/share/pool_sharing.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"
#include "cudyn/detail/unique_handle.hpp"

#include <cuda.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <variant>

namespace cudyn {

// Which kind of allocation was shared (the wire's kind tag).
enum class AllocationKind : std::uint32_t {
    LegacyIpc = 1,  // cuMemAlloc memory: a legacy IPC handle
    Vmm = 2,        // cuMemCreate memory mapped here: a POSIX descriptor or a fabric handle
    Pool = 3,       // memory from a shareable pool: the pool and the pointer
};
// "legacy_ipc", "vmm", "pool".
const char* to_string(AllocationKind kind) noexcept;

class AllocationDescriptor;
class ImportedAllocation;

namespace detail {
struct AllocationDescriptorAccess;  // allocation_sharing.cpp: makes and reads AllocationDescriptor
}  // namespace detail

// What the exporter shares: the kind's descriptor(s), a descriptor to pass
// (SCM_RIGHTS) for the POSIX kinds, and which part of the allocation.
// Move-only: it owns the descriptor it carries (closed with it).
class AllocationDescriptor {
public:
    AllocationKind kind() const noexcept { return kind_; }
    // PosixFileDescriptor or Fabric for VMM and pool memory; None for a legacy handle.
    HandleType handle_type() const noexcept { return handle_type_; }
    std::uint64_t offset_bytes() const noexcept { return offset_; }  // of the shared part in its allocation
    std::uint64_t size_bytes() const noexcept { return size_; }      // of the shared part
    // Of the allocation (for VMM memory, of the mapping the address lies in).
    std::uint64_t allocation_size_bytes() const noexcept { return allocation_size_; }
    // Whether a descriptor travels with it (the POSIX kinds).
    bool carries_descriptor() const noexcept;
    // The process that shared it (its pid there, and a random token, since
    // pids repeat across PID namespaces); true in that very process.
    std::uint64_t exporter_pid() const noexcept { return exporter_pid_; }
    bool exported_by_this_process() const noexcept;

private:
    friend struct detail::AllocationDescriptorAccess;
    // The pool's descriptor (PoolFdDescriptor or PoolFabricDescriptor) and the pointer's.
    template <typename PoolPart>
    struct PoolParts {
        PoolPart pool;
        PoolPointerDescriptor pointer;
    };
    using Parts = std::variant<IpcMemoryDescriptor, MemoryFdDescriptor, MemoryFabricDescriptor, PoolParts<PoolFdDescriptor>,
                               PoolParts<PoolFabricDescriptor>>;
    AllocationDescriptor(Parts parts, std::uint64_t offset, std::uint64_t size, std::uint64_t allocation_size,
                     std::uint64_t exporter_pid, std::uint64_t exporter_token) noexcept;

    Parts parts_;
    AllocationKind kind_;
    HandleType handle_type_;
    std::uint64_t offset_;
    std::uint64_t size_;
    std::uint64_t allocation_size_;
    std::uint64_t exporter_pid_;
    std::uint64_t exporter_token_;
};

// Shares [address, address + bytes) of the allocation `address` lies in (a
// current context is needed for cuMemAlloc memory). InvalidArgument, before
// the driver, for a null address, a zero size or a range that wraps; after
// asking it, for an address the driver does not know and a range running past
// the allocation (for VMM memory, past the mapping: VMM memory is shared one
// mapping, one physical allocation, at a time). NotSupported, naming why, for
// memory that has no inter-process handle (see above). The driver's errors
// otherwise.
Result<AllocationDescriptor> export_allocation(CUdeviceptr address, std::size_t bytes);
// From `address` to the end of its allocation (of its mapping, for VMM memory).
Result<AllocationDescriptor> export_allocation(CUdeviceptr address);
template <typename T>
Result<AllocationDescriptor> export_allocation(DeviceSpan<T> part) {
    return export_allocation(part.device_address(), part.size_bytes());
}

// The tag of the channel message send_descriptor() writes.
inline constexpr std::uint32_t kAllocationMessageTag = 0x43555341;  // "CUSA"

// One message: a versioned record (kind, handle type, offset, sizes), then the
// kind's own records (IpcMemoryDescriptor; PhysicalMemoryInfo or
// MemoryFabricDescriptor; PoolInfo or PoolFabricDescriptor, then
// PoolPointerDescriptor), with the descriptor riding along for the POSIX
// kinds. The descriptor stays open here.
Result<void> send_descriptor(FdChannel& channel, const AllocationDescriptor& shared,
                         std::chrono::milliseconds timeout = kDefaultChannelTimeout);
// The other side. InvalidArgument for a message with another tag, a record
// that fails its checks (magic, version, length, an unknown kind or handle
// type, parts that disagree with each other), or a descriptor missing where
// the kind needs one or present where it needs none (nothing stays open on
// failure); the channel's errors otherwise.
Result<AllocationDescriptor> receive_allocation(FdChannel& channel,
                                        std::chrono::milliseconds timeout = kDefaultChannelTimeout);

// Opens what another process shared, in the current context:
//   * a legacy handle: import_ipc_memory (the refusals of imported_ipc_memory.hpp);
//   * VMM memory: import_memory_fd / import_memory_fabric, an address range of its
//     size, mapped with read-write access for the current context's device;
//   * pool memory: import_pool_fd / import_pool_fabric, then import_pool_pointer.
// `shared` is left as it was (its descriptor is duplicated for the import), so
// it may be opened again, e.g. in another context. InvalidArgument for a
// AllocationDescriptor this very process made (open the memory directly).
Result<ImportedAllocation> import_allocation(const AllocationDescriptor& shared);

// What import_allocation opened, closed by close() or the destructor, in the order
// the driver needs: the legacy handle closed (cuIpcCloseMemHandle waits for
// the context's work); the VMM mapping unmapped after the device is waited
// for, then the imported allocation released and the range freed
// (MappedRange); the imported pool pointer freed after the context's work,
// then the imported pool destroyed.
class ImportedAllocation {
public:
    ImportedAllocation() noexcept = default;  // empty; move-only

    AllocationKind kind() const noexcept { return owner_.get().kind; }
    // Where the exporter's address is mapped here, and the shared part's size.
    CUdeviceptr device_address() const noexcept { return empty() ? 0 : owner_.get().address; }
    std::size_t size_bytes() const noexcept { return empty() ? 0 : owner_.get().size; }
    // The shared part as bytes (every byte view is valid) or as elements
    // (checked: the exporter's offset and size must suit T).
    DeviceSpan<std::byte> device_span() const noexcept { return DeviceSpan<std::byte>(device_address(), size_bytes()); }
    template <typename T>
    Result<DeviceSpan<T>> device_span_as() const {
        if (empty()) return Error::invalid_argument("ImportedAllocation::device_span_as: nothing is open");
        return DeviceSpan<T>::from_bytes(device_address(), size_bytes());
    }
    bool empty() const noexcept { return owner_.empty(); }

    // Closes now and reports the first refusal; whatever the driver still
    // holds stays held here (close() may be retried). ok() when empty.
    Result<void> close() { return owner_.release(); }

private:
    friend Result<ImportedAllocation> import_allocation(const AllocationDescriptor& shared);
    struct Traits {
        // Dropped unreleased, members go last to first: the opened memory
        // before the pool it came from.
        struct State {
            AllocationKind kind = AllocationKind::LegacyIpc;
            CUdeviceptr address = 0;
            std::size_t size = 0;
            MemoryPool pool;                 // pool kind: the imported pool
            ImportedPoolMemory pool_memory;  // pool kind: the imported pointer
            MappedRange mapping;             // VMM kind: holds the imported memory and the range
            bool mapped = false;             // until mapping.unmap() gave everything back (it may stop half-way)
            ImportedIpcMemory opened;                // legacy kind
        };
        static bool empty(const State& state) noexcept {
            return state.opened.empty() && !state.mapped && state.pool_memory.empty() && state.pool.empty();
        }
        // Closes in order, stopping at the first refusal with the rest held.
        static Result<void> release(State& state);
    };
    explicit ImportedAllocation(Traits::State state) noexcept : owner_(std::move(state)) {}

    detail::UniqueHandle<Traits> owner_;
};

}  // namespace cudyn
