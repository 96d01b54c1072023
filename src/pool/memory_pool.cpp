// cudyn — MemoryPool: creation with its checks, the default and current
// pools, attributes, trimming and access.
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "core/internal.hpp"
#include "core/process_identity.hpp"
#include "device/device_facts.hpp"
#include "pool/internal.hpp"
#include "vmm/internal.hpp"

#include <algorithm>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace cudyn {

namespace {

constexpr detail::Operation kCreate{"MemoryPool::create"};
constexpr detail::Operation kDefaultFor{"MemoryPool::default_for"};
constexpr detail::Operation kCurrentFor{"MemoryPool::current_for"};
constexpr detail::Operation kSetCurrentFor{"MemoryPool::set_current_for"};
constexpr detail::Operation kProperties{"PoolProperties"};
constexpr detail::Operation kManagedDefaultFor{"MemoryPool::managed_default_for"};
constexpr detail::Operation kManagedCurrentFor{"MemoryPool::managed_current_for"};
constexpr detail::Operation kSetManagedCurrentFor{"MemoryPool::set_managed_current_for"};
constexpr detail::Operation kReleaseThreshold{"MemoryPool::release_threshold"};
constexpr detail::Operation kSetReleaseThreshold{"MemoryPool::set_release_threshold"};
constexpr detail::Operation kReuse{"MemoryPool::reuse"};
constexpr detail::Operation kSetReuse{"MemoryPool::set_reuse"};
constexpr detail::Operation kUsage{"MemoryPool::usage"};
constexpr detail::Operation kResetHighWaterMarks{"MemoryPool::reset_high_water_marks"};
constexpr detail::Operation kTrimTo{"MemoryPool::trim_to"};
constexpr detail::Operation kSetAccess{"MemoryPool::set_access"};
constexpr detail::Operation kAccess{"MemoryPool::access"};

CUmemPool_attribute reuse_attribute(PoolReuse policy) noexcept {
    switch (policy) {
        case PoolReuse::FollowEventDependencies: return CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES;
        case PoolReuse::AllowOpportunistic: return CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC;
        case PoolReuse::AllowInternalDependencies: break;
    }
    return CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES;
}

// NotSupported unless the driver has `entry` and device `ordinal` reports
// MEMORY_POOLS_SUPPORTED.
template <typename Pfn>
Result<void> require_pools(Pfn DriverTable::*entry, int ordinal, const detail::Operation& operation) {
    CUDYN_TRY(detail::require_entry(entry));
    // InvalidArgument for an ordinal outside the visible devices.
    CUDYN_TRY_ASSIGN(const auto caps, detail::capabilities(ordinal, operation.name()));
    return detail::require_memory_pools(caps, ordinal, operation);
}

Result<void> require_pool(const MemoryPool& pool, const detail::Operation& operation) {
    if (pool.empty()) return operation.invalid("the pool is empty (moved from or destroyed)");
    return ok();
}

// The handle types a device's pools may be exported as (a mask; read for
// each creation, which is rare next to the allocations a pool serves).
Result<unsigned> pool_handle_types(int ordinal) {
    int mask = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetAttribute_v2000, &mask,
                          CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, static_cast<CUdevice>(ordinal)));
    return static_cast<unsigned>(mask);
}

// NotSupported unless some visible device reports pools at this host
// location (HOST_MEMORY_POOLS_SUPPORTED / HOST_NUMA_MEMORY_POOLS_SUPPORTED):
// the attribute is per device, a host pool serves them all.
Result<void> require_host_pools(const Location& where) {
    const bool numa = where.kind() == LocationKind::HostNuma;
    CUDYN_TRY_ASSIGN(const int count, detail::visible_device_count());
    for (int ordinal = 0; ordinal < count; ++ordinal) {
        CUDYN_TRY_ASSIGN(const auto caps, detail::capabilities(ordinal, kCreate.name()));
        if (numa ? caps.host_numa_memory_pools : caps.host_memory_pools) return ok();
    }
    return kCreate.not_supported("cuMemPoolCreate", std::string("no device reports ") +
                                                        (numa ? "HOST_NUMA_MEMORY_POOLS_SUPPORTED"
                                                              : "HOST_MEMORY_POOLS_SUPPORTED") +
                                                        ": pools at " + where.describe() + " are not supported");
}

// What the location-keyed pool calls take (cuMemGetDefaultMemPool,
// cuMemGetMemPool, cuMemSetMemPool: a device, the host or a host NUMA node),
// checked before the driver as MemoryPool::create checks its location: the
// driver's bare INVALID_DEVICE / INVALID_VALUE would not say which argument.
Result<void> check_pool_location(const Location& location, const detail::Operation& operation) {
    CUDYN_TRY(location.validate(operation.name()));
    if (location.kind() == LocationKind::HostNumaCurrent)
        return operation.invalid(location.describe() +
                                 " is no pool's location: pools are kept per device, host or host NUMA node "
                                 "(name the node: Location::host_numa(n))");
    if (location.kind() == LocationKind::Device) {
        CUDYN_TRY_ASSIGN(const int count, detail::visible_device_count());
        if (location.id() >= count)
            return operation.invalid(location.describe() + " does not exist: " + std::to_string(count) +
                                     " device(s) visible");
    }
    return ok();
}

Result<CUmemLocation> managed_location(const Location& location, const detail::Operation& operation) {
    CUDYN_TRY(check_pool_location(location, operation));
    return location.to_cu();
}

}  // namespace

const char* to_string(PoolMemoryType type) noexcept {
    return type == PoolMemoryType::Managed ? "managed" : "pinned";
}

const char* to_string(PoolReuse policy) noexcept {
    switch (policy) {
        case PoolReuse::FollowEventDependencies: return "follow_event_dependencies";
        case PoolReuse::AllowOpportunistic: return "allow_opportunistic";
        case PoolReuse::AllowInternalDependencies: return "allow_internal_dependencies";
    }
    return "invalid";
}

// ---- PoolProperties -----------------------------------------------------------------------

PoolProperties PoolProperties::with_handle_types(HandleType types) const noexcept {
    PoolProperties copy = *this;
    copy.handle_types_ = types;
    return copy;
}

PoolProperties PoolProperties::with_max_size_bytes(std::size_t bytes) const noexcept {
    PoolProperties copy = *this;
    copy.max_size_bytes_ = bytes;
    return copy;
}

PoolProperties PoolProperties::with_memory_type(PoolMemoryType type) const noexcept {
    PoolProperties copy = *this;
    copy.memory_type_ = type;
    return copy;
}

Result<void> PoolProperties::validate() const {
    if (memory_type_ != PoolMemoryType::Pinned && memory_type_ != PoolMemoryType::Managed)
        return kProperties.invalid("memory type " + std::to_string(static_cast<int>(memory_type_)) + " is unknown");
    if (location_.kind() == LocationKind::Host && handle_types_ != HandleType::None)
        return kProperties.invalid("handle types: a pool at the HOST location cannot be shared (" +
                                   to_string(handle_types_) + " asked)");
    CUDYN_TRY(detail::check_location_and_handle_types(location_, handle_types_, kProperties, "cuMemPoolCreate"));
#if !defined(_WIN32)
    if (includes(handle_types_, HandleType::Win32) || includes(handle_types_, HandleType::Win32Kmt))
        return kProperties.invalid("handle types: Win32 handles exist only on Windows");
#endif
    return ok();
}

CUmemPoolProps PoolProperties::to_cu() const noexcept {
    CUmemPoolProps props{};
    props.allocType =
        memory_type_ == PoolMemoryType::Managed ? CU_MEM_ALLOCATION_TYPE_MANAGED : CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = static_cast<CUmemAllocationHandleType>(handle_types_);
    props.location = location_.to_cu();
    props.maxSize = max_size_bytes_;
    return props;
}

std::string PoolProperties::describe() const {
    std::string text = location_.describe();
    if (memory_type_ == PoolMemoryType::Managed) text += ", managed";
    if (handle_types_ != HandleType::None) text += ", handles " + to_string(handle_types_);
    if (max_size_bytes_ != 0) text += ", max " + std::to_string(max_size_bytes_) + " bytes";
    return text;
}

// ---- MemoryPool ---------------------------------------------------------------------------

Result<MemoryPool> MemoryPool::create(const PoolProperties& properties) {
    if (auto valid = properties.validate(); !valid) return kCreate.context(std::move(valid).error());
    const Location& where = properties.location();
    if (where.kind() == LocationKind::Device) {
        CUDYN_TRY(require_pools(&DriverTable::cuMemPoolCreate_v11020, where.id(), kCreate));
        if (properties.handle_types() != HandleType::None) {
            CUDYN_TRY_ASSIGN(const unsigned supported, pool_handle_types(where.id()));
            const unsigned wanted = static_cast<unsigned>(properties.handle_types());
            if ((wanted & ~supported) != 0)
                return kCreate.not_supported(
                    {}, properties.describe() + ": " + to_string(static_cast<HandleType>(wanted & ~supported)) +
                            " handles are not supported for pools on device " + std::to_string(where.id()) +
                            " (CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: " +
                            to_string(static_cast<HandleType>(supported)) + ")");
        }
    } else {
        CUDYN_TRY(detail::require_entry(&DriverTable::cuMemPoolCreate_v11020));
        if (properties.memory_type() == PoolMemoryType::Pinned) CUDYN_TRY(require_host_pools(where));
    }
    // Managed pools came with CUDA 13, as did the location-keyed pool calls.
    if (properties.memory_type() == PoolMemoryType::Managed && !has_entry(&DriverTable::cuMemGetDefaultMemPool_v13000))
        return kCreate.not_supported("cuMemPoolCreate", "pools of managed memory need a CUDA 13 driver");
    const CUmemPoolProps props = properties.to_cu();
    CUmemoryPool pool = nullptr;
    if (auto created = call_driver(&DriverTable::cuMemPoolCreate_v11020, &pool, &props); !created) {
        // Without an IMEX channel the driver may refuse a fabric-shareable
        // pool already here: the same NotSupported as at export.
        if (!includes(properties.handle_types(), HandleType::Fabric)) return std::move(created).error();
        return detail::fabric_error(std::move(created).error(), kCreate.name());
    }
    return MemoryPool(pool, true, where, properties.handle_types());
}

Result<MemoryPool> MemoryPool::default_for(const Device& device) {
    CUDYN_TRY(require_pools(&DriverTable::cuDeviceGetDefaultMemPool_v11020, device.ordinal(),
                            kDefaultFor));
    CUmemoryPool pool = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetDefaultMemPool_v11020, &pool, device.handle()));
    return MemoryPool(pool, false, Location::device(device.ordinal()));
}

Result<MemoryPool> MemoryPool::current_for(const Device& device) {
    CUDYN_TRY(require_pools(&DriverTable::cuDeviceGetMemPool_v11020, device.ordinal(), kCurrentFor));
    CUmemoryPool pool = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetMemPool_v11020, &pool, device.handle()));
    return MemoryPool(pool, false, Location::device(device.ordinal()));
}

Result<void> MemoryPool::set_current_for(const Device& device) const {
    CUDYN_TRY(require_pool(*this, kSetCurrentFor));
    CUDYN_TRY(require_pools(&DriverTable::cuDeviceSetMemPool_v11020, device.ordinal(), kSetCurrentFor));
    if (location() != Location::device(device.ordinal()))
        return kSetCurrentFor.invalid("the pool lives in " + location().describe() + ", not on device " +
                                      std::to_string(device.ordinal()));
    return call_driver(&DriverTable::cuDeviceSetMemPool_v11020, device.handle(), handle());
}

Result<MemoryPool> MemoryPool::default_for(Location location) {
    CUDYN_TRY(check_pool_location(location, kDefaultFor));
    if (!has_entry(&DriverTable::cuMemGetDefaultMemPool_v13000) && location.kind() == LocationKind::Device) {
        CUDYN_TRY_ASSIGN(const Device device, Device::get(location.id()));
        return default_for(device);
    }
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemGetDefaultMemPool_v13000));
    CUmemLocation where = location.to_cu();
    CUmemoryPool pool = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuMemGetDefaultMemPool_v13000, &pool, &where, CU_MEM_ALLOCATION_TYPE_PINNED));
    return MemoryPool(pool, false, location);
}

Result<MemoryPool> MemoryPool::current_for(Location location) {
    CUDYN_TRY(check_pool_location(location, kCurrentFor));
    if (!has_entry(&DriverTable::cuMemGetMemPool_v13000) && location.kind() == LocationKind::Device) {
        CUDYN_TRY_ASSIGN(const Device device, Device::get(location.id()));
        return current_for(device);
    }
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemGetMemPool_v13000));
    CUmemLocation where = location.to_cu();
    CUmemoryPool pool = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuMemGetMemPool_v13000, &pool, &where, CU_MEM_ALLOCATION_TYPE_PINNED));
    return MemoryPool(pool, false, location);
}

Result<void> MemoryPool::set_current_for(Location location) const {
    CUDYN_TRY(require_pool(*this, kSetCurrentFor));
    CUDYN_TRY(check_pool_location(location, kSetCurrentFor));
    if (!has_entry(&DriverTable::cuMemSetMemPool_v13000) && location.kind() == LocationKind::Device) {
        CUDYN_TRY_ASSIGN(const Device device, Device::get(location.id()));
        return set_current_for(device);
    }
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemSetMemPool_v13000));
    if (this->location() != location)
        return kSetCurrentFor.invalid("the pool lives in " + this->location().describe() + ", not in " +
                                      location.describe());
    CUmemLocation where = location.to_cu();
    return call_driver(&DriverTable::cuMemSetMemPool_v13000, &where, CU_MEM_ALLOCATION_TYPE_PINNED, handle());
}

Result<MemoryPool> MemoryPool::managed_default_for(Location location) {
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemGetDefaultMemPool_v13000));
    CUDYN_TRY_ASSIGN(CUmemLocation where, managed_location(location, kManagedDefaultFor));
    CUmemoryPool pool = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuMemGetDefaultMemPool_v13000, &pool, &where, CU_MEM_ALLOCATION_TYPE_MANAGED));
    return MemoryPool(pool, false, location);
}

Result<MemoryPool> MemoryPool::managed_current_for(Location location) {
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemGetMemPool_v13000));
    CUDYN_TRY_ASSIGN(CUmemLocation where, managed_location(location, kManagedCurrentFor));
    CUmemoryPool pool = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuMemGetMemPool_v13000, &pool, &where, CU_MEM_ALLOCATION_TYPE_MANAGED));
    return MemoryPool(pool, false, location);
}

Result<void> MemoryPool::set_managed_current_for(Location location) const {
    CUDYN_TRY(require_pool(*this, kSetManagedCurrentFor));
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemSetMemPool_v13000));
    CUDYN_TRY_ASSIGN(CUmemLocation where, managed_location(location, kSetManagedCurrentFor));
    return call_driver(&DriverTable::cuMemSetMemPool_v13000, &where, CU_MEM_ALLOCATION_TYPE_MANAGED, handle());
}

bool PoolOrigin::is_this_process() const noexcept { return detail::is_this_process(exporter_pid, exporter_token); }

PoolOrigin MemoryPool::origin() const noexcept {
    if (imported()) return held_->origin;
    const detail::ProcessIdentity self = detail::this_process();
    return PoolOrigin{self.pid, self.token, static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(handle()))};
}

namespace {

// The pools keep_pool_from_destroy named.
detail::PoolHandleList& undestroyable() {
    static auto* list = new detail::PoolHandleList();  // never destroyed: owners die at exit too
    return *list;
}

}  // namespace

void detail::PoolHandleList::add(CUmemoryPool pool) {
    const std::lock_guard<std::mutex> lock(mutex_);
    pools_.push_back(pool);
}

bool detail::PoolHandleList::take(CUmemoryPool pool) noexcept {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto found = std::find(pools_.begin(), pools_.end(), pool);
    if (found == pools_.end()) return false;
    pools_.erase(found);
    return true;
}

bool detail::PoolHandleList::contains(CUmemoryPool pool) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return std::find(pools_.begin(), pools_.end(), pool) != pools_.end();
}

Result<void> detail::require_memory_pools(const DeviceCapabilities& caps, int ordinal, const Operation& operation) {
    if (caps.memory_pools) return ok();
    return operation.not_supported({}, "device " + std::to_string(ordinal) +
                                           " does not support memory pools "
                                           "(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0)");
}

void detail::keep_pool_from_destroy(CUmemoryPool pool) noexcept {
    try {
        undestroyable().add(pool);
    } catch (...) {
        // Out of memory for one pointer: the pool is destroyed as usual.
    }
}

Result<void> MemoryPool::Held::release() {
    if (!undestroyable().take(pool)) CUDYN_TRY(call_driver(&DriverTable::cuMemPoolDestroy_v11020, pool));
    *this = Held{};
    return ok();
}

Result<std::uint64_t> MemoryPool::release_threshold() const {
    CUDYN_TRY(require_pool(*this, kReleaseThreshold));
    cuuint64_t bytes = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemPoolGetAttribute_v11020, handle(), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                          static_cast<void*>(&bytes)));
    return static_cast<std::uint64_t>(bytes);
}

Result<void> MemoryPool::set_release_threshold(std::uint64_t bytes) const {
    CUDYN_TRY(require_pool(*this, kSetReleaseThreshold));
    cuuint64_t value = bytes;
    return call_driver(&DriverTable::cuMemPoolSetAttribute_v11020, handle(), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                       static_cast<void*>(&value));
}

Result<bool> MemoryPool::reuse(PoolReuse policy) const {
    CUDYN_TRY(require_pool(*this, kReuse));
    int enabled = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemPoolGetAttribute_v11020, handle(), reuse_attribute(policy),
                          static_cast<void*>(&enabled)));
    return enabled != 0;
}

Result<void> MemoryPool::set_reuse(PoolReuse policy, bool enabled) const {
    CUDYN_TRY(require_pool(*this, kSetReuse));
    int value = enabled ? 1 : 0;
    return call_driver(&DriverTable::cuMemPoolSetAttribute_v11020, handle(), reuse_attribute(policy),
                       static_cast<void*>(&value));
}

Result<PoolUsage> MemoryPool::usage() const {
    CUDYN_TRY(require_pool(*this, kUsage));
    const auto read = [this](CUmemPool_attribute attribute, std::uint64_t& out) -> Result<void> {
        cuuint64_t value = 0;
        CUDYN_TRY(call_driver(&DriverTable::cuMemPoolGetAttribute_v11020, handle(), attribute,
                              static_cast<void*>(&value)));
        out = value;
        return ok();
    };
    PoolUsage usage;
    CUDYN_TRY(read(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, usage.reserved_bytes));
    CUDYN_TRY(read(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, usage.reserved_high_bytes));
    CUDYN_TRY(read(CU_MEMPOOL_ATTR_USED_MEM_CURRENT, usage.used_bytes));
    CUDYN_TRY(read(CU_MEMPOOL_ATTR_USED_MEM_HIGH, usage.used_high_bytes));
    return usage;
}

Result<void> MemoryPool::reset_high_water_marks() const {
    CUDYN_TRY(require_pool(*this, kResetHighWaterMarks));
    // The driver takes only 0 for a high-water mark, which it reads as
    // "reset to the current value".
    for (const CUmemPool_attribute attribute : {CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, CU_MEMPOOL_ATTR_USED_MEM_HIGH}) {
        cuuint64_t zero = 0;
        CUDYN_TRY(call_driver(&DriverTable::cuMemPoolSetAttribute_v11020, handle(), attribute,
                              static_cast<void*>(&zero)));
    }
    return ok();
}

Result<void> MemoryPool::trim_to(std::size_t keep_bytes) const {
    CUDYN_TRY(require_pool(*this, kTrimTo));
    return call_driver(&DriverTable::cuMemPoolTrimTo_v11020, handle(), keep_bytes);
}

Result<void> MemoryPool::set_access(const AccessGrant& grant) const {
    CUDYN_TRY(require_pool(*this, kSetAccess));
    const Location& who = grant.location;
    if (who.kind() != LocationKind::Device)
        return kSetAccess.invalid("access is granted to devices; " + who.describe() + " is not one");
    if (grant.flags != AccessFlags::None && grant.flags != AccessFlags::Read && grant.flags != AccessFlags::ReadWrite)
        return kSetAccess.invalid("unknown access flags " + std::to_string(static_cast<int>(grant.flags)));
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemPoolSetAccess_v11020));
    CUDYN_TRY(detail::capabilities(who.id(), kSetAccess.name()));  // InvalidArgument outside the visible devices
    if (who == location()) {
        if (grant.flags != AccessFlags::ReadWrite)
            return kSetAccess.invalid(who.describe() +
                                      " owns the pool and always has read_write access; it cannot be set to " +
                                      to_string(grant.flags));
    } else if (location().kind() == LocationKind::Device && grant.flags != AccessFlags::None) {
        CUDYN_TRY_ASSIGN(const Device owner, Device::get(location().id()));
        CUDYN_TRY_ASSIGN(const Device peer, Device::get(who.id()));
        CUDYN_TRY_ASSIGN(const bool reachable, peer.can_access_peer(owner));
        if (!reachable)
            return kSetAccess.not_supported({}, who.describe() + " cannot access " + location().describe() +
                                                    "'s memory (cuDeviceCanAccessPeer is 0)");
    }
    const CUmemAccessDesc descriptor = grant.to_cu();
    return call_driver(&DriverTable::cuMemPoolSetAccess_v11020, handle(), &descriptor, std::size_t{1});
}

Result<AccessFlags> MemoryPool::access(Location location) const {
    CUDYN_TRY(require_pool(*this, kAccess));
    CUDYN_TRY(location.validate("MemoryPool::access: location"));
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemPoolGetAccess_v11020));
    CUmemLocation where = location.to_cu();
    CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CUDYN_TRY(call_driver(&DriverTable::cuMemPoolGetAccess_v11020, &flags, handle(), &where));
    return static_cast<AccessFlags>(flags);
}

}  // namespace cudyn
