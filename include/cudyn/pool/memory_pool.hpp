// cudyn — MemoryPool: a stream-ordered memory pool (cuMemPoolCreate), a
// device's default or current pool, their attributes and access. A pool keeps
// what is freed for the next allocation (stream_ordered_buffer.hpp) instead of
// returning it to the device, and belongs to the process, not to a context.
// Where pools are missing (a driver before 11.2, a device without
// MEMORY_POOLS_SUPPORTED, a handle type the device's pools lack) calls are
// NotSupported naming the reason, before the driver is asked to create anything.
#pragma once

#include "cudyn/core/location.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/detail/import_ticket.hpp"
#include "cudyn/detail/ledger_ticket.hpp"
#include "cudyn/detail/unique_handle.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/memory_access.hpp"

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace cudyn {

class Device;
namespace detail {
struct PoolAccess;  // how the library's sharing sources build, and mark, pools
}  // namespace detail

// The memory a pool hands out: pinned memory at its location (the default),
// or managed memory preferring its location (CUDA 13).
enum class PoolMemoryType { Pinned, Managed };
// "pinned", "managed".
const char* to_string(PoolMemoryType type) noexcept;

// What cuMemPoolCreate is given (CUmemPoolProps). A value type, built like
// AllocationProperties: each with_* returns a modified copy. The location is
// a device, the host (CUDA 13) or a host NUMA node.
class PoolProperties {
public:
    explicit PoolProperties(Location location) noexcept : location_(location) {}
    static PoolProperties device(int ordinal) noexcept { return PoolProperties(Location::device(ordinal)); }

    // The handle types the pool can be exported as (PosixFileDescriptor,
    // Fabric; None, the default, makes a pool that cannot be shared).
    PoolProperties with_handle_types(HandleType types) const noexcept;
    // The most the pool may ever reserve (CUmemPoolProps::maxSize, CUDA 12.2+);
    // 0, the default, leaves it to the driver (no limit of the pool's own).
    PoolProperties with_max_size_bytes(std::size_t bytes) const noexcept;
    // Pinned (the default) or managed memory (CUmemPoolProps::allocType).
    PoolProperties with_memory_type(PoolMemoryType type) const noexcept;

    const Location& location() const noexcept { return location_; }
    HandleType handle_types() const noexcept { return handle_types_; }
    std::size_t max_size_bytes() const noexcept { return max_size_bytes_; }
    PoolMemoryType memory_type() const noexcept { return memory_type_; }

    // What can be checked without the driver: InvalidArgument naming the
    // field (a negative id, host-NUMA-current, unknown handle-type bits, a
    // Win32 handle type off Windows, a handle type on a HOST pool, which the
    // driver documents as not IPC capable).
    Result<void> validate() const;
    // The driver's structure: allocation type, location with type and id
    // set, the handle types, maxSize.
    CUmemPoolProps to_cu() const noexcept;
    // "device 0, handles posix_fd, max 1073741824 bytes".
    std::string describe() const;

private:
    Location location_;
    HandleType handle_types_ = HandleType::None;
    std::size_t max_size_bytes_ = 0;
    PoolMemoryType memory_type_ = PoolMemoryType::Pinned;
};

// Which pool a shared pool or pointer comes from: the process that created
// it (pid and its random token, so that two processes with one pid in
// different namespaces differ) and the pool's handle there.
struct PoolOrigin {
    std::uint64_t exporter_pid = 0;
    std::uint64_t exporter_token = 0;
    std::uint64_t pool_id = 0;
    friend bool operator==(const PoolOrigin& a, const PoolOrigin& b) noexcept {
        return a.exporter_pid == b.exporter_pid && a.exporter_token == b.exporter_token && a.pool_id == b.pool_id;
    }
    friend bool operator!=(const PoolOrigin& a, const PoolOrigin& b) noexcept { return !(a == b); }
    // True in the process that created the pool.
    bool is_this_process() const noexcept;
};

// The pool's reuse policies (CU_MEMPOOL_ATTR_REUSE_*), all on by default.
enum class PoolReuse {
    // A free on one stream may serve an allocation on another stream that
    // waits (through an event) for the freeing stream.
    FollowEventDependencies,
    // Memory whose free has completed may serve any stream.
    AllowOpportunistic,
    // The driver may make an allocating stream wait for a free on another
    // stream to reuse its memory.
    AllowInternalDependencies,
};
// "follow_event_dependencies", "allow_opportunistic", "allow_internal_dependencies".
const char* to_string(PoolReuse policy) noexcept;

// What a pool holds (CU_MEMPOOL_ATTR_{RESERVED,USED}_MEM_{CURRENT,HIGH}):
// reserved is taken from the device, used is handed out; the high-water
// marks are the largest values since the pool was made or the marks were
// reset.
struct PoolUsage {
    std::uint64_t reserved_bytes = 0;
    std::uint64_t reserved_high_bytes = 0;
    std::uint64_t used_bytes = 0;
    std::uint64_t used_high_bytes = 0;
};

class MemoryPool {
public:
    MemoryPool() noexcept = default;  // empty: no pool

    // A new pool. After properties.validate(): NotSupported when the driver
    // has no cuMemPoolCreate, the device reports no MEMORY_POOLS_SUPPORTED,
    // or a handle type is not in its MEMPOOL_SUPPORTED_HANDLE_TYPES;
    // InvalidArgument for a device ordinal outside the visible devices.
    // Pinned pools on the host or a host NUMA node need a device that reports
    // HOST_MEMORY_POOLS_SUPPORTED / HOST_NUMA_MEMORY_POOLS_SUPPORTED, and
    // managed pools a CUDA 13 driver: NotSupported otherwise.
    static Result<MemoryPool> create(const PoolProperties& properties);
    // The device's default pool, and the pool cuMemAllocAsync on its streams
    // allocates from (the default one until set_current_for changes it). Not
    // owned: the driver keeps them.
    static Result<MemoryPool> default_for(const Device& device);
    static Result<MemoryPool> current_for(const Device& device);
    // Makes this pool the one cuMemAllocAsync allocates from on `device`'s
    // streams (cuDeviceSetMemPool). The pool must live in that device:
    // InvalidArgument otherwise.
    Result<void> set_current_for(const Device& device) const;
    // The same for any location of pinned memory (a device, the host, a
    // host NUMA node: cuMemGetDefaultMemPool / cuMemGetMemPool /
    // cuMemSetMemPool, CUDA 13). A driver without them still answers for a
    // device location (the calls above); for a host location NotSupported.
    // set_current_for: the pool must live at `location` (InvalidArgument).
    static Result<MemoryPool> default_for(Location location);
    static Result<MemoryPool> current_for(Location location);
    Result<void> set_current_for(Location location) const;

    // CUDA 13's pools of managed memory for a location (device or host):
    // the default one, the current one, and making this pool the current one.
    // NotSupported where the driver lacks cuMemGetDefaultMemPool /
    // cuMemGetMemPool / cuMemSetMemPool, or answers that managed pools are
    // not supported there.
    static Result<MemoryPool> managed_default_for(Location location);
    static Result<MemoryPool> managed_current_for(Location location);
    Result<void> set_managed_current_for(Location location) const;

    // Move-only. The destructor destroys an owned pool, silently; the driver
    // keeps its memory until every allocation from it has been freed.
    // Destroys an owned pool now and reports the driver's answer (on a
    // refusal the pool is still owned, and destroy() may be retried); does
    // nothing for a default or current pool.
    Result<void> destroy() { return held_.release(); }

    CUmemoryPool handle() const noexcept { return held_->pool; }
    bool empty() const noexcept { return handle() == nullptr; }
    // True for a pool this object created or imported (and destroys).
    bool owned() const noexcept { return held_->owned; }
    // Where the pool's memory lives (its device, for a device pool).
    const Location& location() const noexcept { return held_->location; }
    // The handle types it was created with (None for default pools, whose
    // types cudyn does not know).
    HandleType handle_types() const noexcept { return held_->handle_types; }
    // True for a pool imported from another process (pool_sharing.hpp).
    bool imported() const noexcept { return held_->imported; }
    // True once export_pool_fd or export_pool_fabric shared this pool (the
    // flag moves with the pool): the driver exports a pool's pointers only
    // after the pool itself, so export_pool_pointer asks for it.
    bool exported() const noexcept { return held_->exported.value.load(); }
    // The pool's identity across processes: this process and the handle for
    // a pool made here, the exporter's for an imported one.
    PoolOrigin origin() const noexcept;

    // Freed memory the pool keeps rather than returning to the device at the
    // next synchronization (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD); 0 by default.
    // UINT64_MAX keeps everything.
    Result<std::uint64_t> release_threshold() const;
    Result<void> set_release_threshold(std::uint64_t bytes) const;
    Result<bool> reuse(PoolReuse policy) const;
    Result<void> set_reuse(PoolReuse policy, bool enabled) const;
    // The four usage figures, read together.
    Result<PoolUsage> usage() const;
    // Sets both high-water marks back to the current values.
    Result<void> reset_high_water_marks() const;
    // Returns memory the pool keeps unused to the device until it holds at
    // most `keep_bytes` (cuMemPoolTrimTo); memory in use stays.
    Result<void> trim_to(std::size_t keep_bytes) const;

    // Lets another device use the pool's memory (cuMemPoolSetAccess). The
    // grant must name a device; InvalidArgument for the pool's own device
    // with anything but ReadWrite (it always has full access), NotSupported
    // when the two devices cannot access each other (cuDeviceCanAccessPeer),
    // checked before the driver is asked.
    Result<void> set_access(const AccessGrant& grant) const;
    // How `location` may access the pool's memory (cuMemPoolGetAccess).
    Result<AccessFlags> access(Location location) const;

private:
    friend struct detail::PoolAccess;
    // Set by the exports, which take the pool const and may run on several
    // threads: atomic, copied as a value when the record moves.
    struct ExportedFlag {
        mutable std::atomic<bool> value{false};
        ExportedFlag() noexcept = default;
        ExportedFlag(const ExportedFlag& other) noexcept : value(other.value.load()) {}
        ExportedFlag& operator=(const ExportedFlag& other) noexcept {
            value.store(other.value.load());
            return *this;
        }
    };
    struct Held {
        CUmemoryPool pool = nullptr;
        bool owned = false;  // false: a device's default or current pool, nothing to destroy
        Location location = Location::device(0);
        bool imported = false;
        PoolOrigin origin;                            // imported pools only
        HandleType handle_types = HandleType::None;  // what the pool can be exported as
        ExportedFlag exported;
        detail::LedgerTicket ledger;  // pools this owner destroys: counted (no bytes)
        detail::ImportTicket listed;  // imported pools: in live_imports()

        bool empty() const noexcept { return !owned; }
        // cuMemPoolDestroy (a refusal keeps the pool); a pool the driver must
        // not destroy (its fabric export was refused) is only let go of.
        Result<void> release();
    };
    MemoryPool(CUmemoryPool pool, bool owned, Location location, HandleType types = HandleType::None) noexcept
        : MemoryPool(Held{pool, owned, location, false, {}, types, {}, {}, {}}) {}
    explicit MemoryPool(Held held) noexcept : held_(std::move(held)) {
        if (held_->owned) held_->ledger = detail::ledger_open(MemoryKind::Pool, ledger_device(held_->location), 0, 0);
    }
    static int ledger_device(const Location& location) noexcept {
        return location.kind() == LocationKind::Device ? location.id() : -1;
    }
    detail::UniqueHandle<Held> held_;
};

}  // namespace cudyn
