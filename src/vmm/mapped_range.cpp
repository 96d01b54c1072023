// cudyn — MappedRange: cuMemMap of a whole PhysicalMemory into an AddressRange,
// with bounds, granularity and overlap checked first.
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/device/primary_context.hpp"

#include "core/internal.hpp"
#include "vmm/internal.hpp"

#include <string>
#include <utility>

namespace cudyn {

namespace {

constexpr detail::Operation kMap{"MappedRange::map"};
constexpr detail::Operation kSetAccess{"MappedRange::set_access"};
constexpr detail::Operation kAccess{"MappedRange::access"};

}  // namespace

Result<MappedRange> MappedRange::map(const AddressRange& range, std::size_t offset, const PhysicalMemory& memory) {
    if (range.empty()) return kMap.invalid("the range is empty (moved from or freed)");
    if (memory.empty()) return kMap.invalid("the memory is empty (moved from or released)");
    const std::size_t bytes = memory.size_bytes();
    const std::size_t granularity = memory.granularity();
    if (offset > range.size_bytes() || bytes > range.size_bytes() - offset)
        return kMap.invalid(std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                            " do not fit in the range of " + std::to_string(range.size_bytes()) + " bytes");
    if (offset % granularity != 0)
        return kMap.invalid("offset " + std::to_string(offset) + " is not a multiple of the memory's granularity " +
                            std::to_string(granularity));
    const CUdeviceptr address = range.device_address() + offset;
    if (address % granularity != 0)
        return kMap.invalid("the range address is not aligned to the memory's granularity " +
                            std::to_string(granularity) + " (reserve with alignment 0 or a multiple of it)");
    CUDYN_TRY_ASSIGN(auto context, detail::OwnerContext::current());
    const auto& reservation = detail::VmmAccess::reservation(range);
    std::size_t clash = 0;
    if (!reservation->claim(offset, bytes, &clash, memory.properties()->location()))
        return kMap.invalid(std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                            " overlap the mapping at offset " + std::to_string(clash));
    const auto mapped = call_driver(&DriverTable::cuMemMap_v10020, address, bytes, std::size_t{0}, memory.handle(), 0ULL);
    if (!mapped) {
        reservation->unclaim(offset);
        return mapped.error();
    }
    Held held;
    held.context = std::move(context);
    held.reservation = reservation;
    held.memory = detail::VmmAccess::record(memory);
    held.address = address;
    held.offset = offset;
    held.size = bytes;
    held.mapped = true;
    const Location& where = held.memory->properties.location();
    held.ledger = detail::ledger_open(MemoryKind::VmmMapped, where.kind() == LocationKind::Device ? where.id() : -1,
                                      bytes, static_cast<std::uintptr_t>(address));
    return MappedRange(std::move(held));
}

Result<MappedRange> MappedRange::map(const AddressRange& range, std::size_t offset, const PhysicalMemory& memory,
                                     std::initializer_list<AccessGrant> access) {
    return map_with_access(range, offset, memory, access.begin(), access.size());
}

Result<MappedRange> MappedRange::map(const AddressRange& range, std::size_t offset, const PhysicalMemory& memory,
                                     const std::vector<AccessGrant>& access) {
    return map_with_access(range, offset, memory, access.data(), access.size());
}

Result<MappedRange> MappedRange::map_with_access(const AddressRange& range, std::size_t offset,
                                                 const PhysicalMemory& memory, const AccessGrant* grants,
                                                 std::size_t count) {
    if (!memory.empty()) {
        if (auto checked = detail::check_grants(memory.properties()->location(), grants, count); !checked)
            return kMap.context(std::move(checked).error());
    }
    auto mapping = map(range, offset, memory);
    if (!mapping) return mapping;
    // On failure the local mapping unmaps itself on the way out (no work can
    // have used an inaccessible mapping: nothing to wait for).
    if (auto access = detail::apply_access(mapping->held_->address, mapping->held_->size, grants, count); !access) {
        mapping->set_teardown(Teardown::CallerSynchronized);
        return std::move(access).error();
    }
    mapping->held_->granted(grants, count);
    return mapping;
}

Result<void> MappedRange::set_access(Location location, AccessFlags flags) {
    const AccessGrant grant{location, flags};
    return set_access(&grant, 1);
}

Result<void> MappedRange::set_access(std::initializer_list<AccessGrant> grants) {
    return set_access(grants.begin(), grants.size());
}

Result<void> MappedRange::set_access(const std::vector<AccessGrant>& grants) {
    return set_access(grants.data(), grants.size());
}

Result<void> MappedRange::set_access(const AccessGrant* grants, std::size_t count) {
    if (empty()) return kSetAccess.invalid("the mapping is empty (moved from or unmapped)");
    if (auto checked = detail::check_grants(held_->memory->properties.location(), grants, count); !checked)
        return kSetAccess.context(std::move(checked).error());
    CUDYN_TRY(detail::apply_access(held_->address, held_->size, grants, count));
    held_->granted(grants, count);
    return ok();
}

Result<AccessFlags> MappedRange::access(Location location) const {
    if (empty()) return kAccess.invalid("the mapping is empty (moved from or unmapped)");
    CUDYN_TRY(location.validate("MappedRange::access: location"));
    const CUmemLocation where = location.to_cu();
    unsigned long long flags = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemGetAccess_v10020, &flags, &where, held_->address));
    return static_cast<AccessFlags>(flags);
}

void* MappedRange::host_address() const noexcept {
    if (!held_->mapped || !held_->memory->properties.location().is_host()) return nullptr;
    // The later of this mapping's own host grant and a range-wide one decides.
    const auto range = held_->reservation->granted_to(held_->offset);
    const bool host = range.range_host_seq > held_->host_seq ? range.range_host : held_->host_access;
    if (!host) return nullptr;
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(held_->address));
}

const Location* MappedRange::memory_location() const noexcept {
    return held_->mapped ? &held_->memory->properties.location() : nullptr;
}

void MappedRange::Held::granted(const AccessGrant* grants, std::size_t count) noexcept {
    users |= detail::granted_devices(grants, count);
    bool names_host = false;
    for (std::size_t i = 0; i < count; ++i) names_host = names_host || grants[i].location.is_host();
    if (names_host) {
        host_access = detail::host_granted(grants, count, host_access);
        host_seq = detail::next_grant_seq();
    }
}

Result<void> MappedRange::Held::release() {
    Result<void> waited = ok();
    if (mapped) {
        // Devices granted through the range (set_range_access) count too.
        if (teardown == Teardown::WaitForDevice)
            waited = detail::wait_for_device_users(context, users | reservation->granted_to(offset).range_users);
        // Unmapped even when the wait failed: a context that faulted runs no
        // more work, and at exit the driver answers every call with an error.
        CUDYN_TRY(call_driver(&DriverTable::cuMemUnmap_v10020, address, size));  // refused: still mapped
        mapped = false;
        ledger.close();
        reservation->unclaim(offset);
    }
    // Then the handle (released if this was its last owner), then the
    // reservation (freed if last): the driver's order. A refusal keeps it.
    CUDYN_TRY(detail::let_go(memory));
    CUDYN_TRY(detail::let_go(reservation));
    // Nothing is held any more; the teardown mode stays what was set.
    Held emptied;
    emptied.teardown = teardown;
    *this = std::move(emptied);
    return waited;
}

void MappedRange::Held::abandon() noexcept {
    // The reservation counts its live mappings (overlap checks, AddressRange::free):
    // this one has no owner any more.
    if (mapped) reservation->unclaim(offset);
}

namespace detail {

namespace {

// The primary context of device `ordinal`, synchronized if it is active
// (retained for the while, so it cannot go away meanwhile).
Result<void> synchronize_primary_context(int ordinal) {
    CUDYN_TRY_ASSIGN(const Device device, Device::get(ordinal));
    unsigned int flags = 0;
    int active = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDevicePrimaryCtxGetState_v7000, device.handle(), &flags, &active));
    if (active == 0) return ok();
    CUDYN_TRY_ASSIGN(const PrimaryContext context, PrimaryContext::retain(device));
    return in_context(context.handle(), [] { return call_driver(&DriverTable::cuCtxSynchronize_v2000); });
}

}  // namespace

Result<void> wait_for_device_users(const OwnerContext& owner, std::uint64_t devices) {
    Result<void> result =
        in_context(owner.handle(), [] { return call_driver(&DriverTable::cuCtxSynchronize_v2000); });
    // No context current (and none held): no work can be running in it.
    if (!result && result.error().driver_result == CUDA_ERROR_INVALID_CONTEXT && owner.empty()) result = ok();
    // Only up to the highest device granted (usually the first few): every
    // unmap comes here.
    std::uint64_t rest = devices;
    for (int device = 0; rest != 0; ++device, rest >>= 1) {
        if ((rest & 1) == 0) continue;
        if (!owner.empty() && owner.device() == static_cast<CUdevice>(device)) continue;
        auto synchronized = synchronize_primary_context(device);
        if (!synchronized && result.has_value()) result = std::move(synchronized);
    }
    return result;
}

}  // namespace detail

}  // namespace cudyn
