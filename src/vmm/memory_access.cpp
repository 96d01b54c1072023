// cudyn — access grants for mapped VMM memory: checks (peers included) and
// cuMemSetAccess, shared by MappedRange and GrowableBuffer.
#include "cudyn/vmm/memory_access.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/device/device.hpp"

#include "core/internal.hpp"
#include "vmm/internal.hpp"

#include <array>
#include <string>
#include <utility>
#include <vector>

namespace cudyn {

const char* to_string(AccessFlags flags) noexcept {
    switch (flags) {
        case AccessFlags::None: return "none";
        case AccessFlags::Read: return "read";
        case AccessFlags::ReadWrite: return "read_write";
    }
    return "invalid";
}

namespace detail {

namespace {

// A device other than the owner: it must exist, support VMM and reach the
// owner's memory over a peer path. `grant` names the grant in the errors.
Result<void> check_peer(const Location& owner, int accessor_ordinal, const Operation& grant) {
    auto accessor = Device::get(accessor_ordinal);
    if (!accessor) return grant.context(std::move(accessor).error());
    auto vmm = accessor->attribute(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
    if (!vmm || *vmm == 0)
        return grant.not_supported({}, "device " + std::to_string(accessor_ordinal) +
                                           " does not support virtual memory management");
    if (owner.kind() != LocationKind::Device) return ok();
    CUDYN_TRY_ASSIGN(auto owner_device, Device::get(owner.id()));
    CUDYN_TRY_ASSIGN(auto can, accessor->can_access_peer(owner_device));
    if (!can)
        return grant.not_supported(entry_info(&DriverTable::cuDeviceCanAccessPeer_v4000).abi_symbol,
                                   "device " + std::to_string(accessor_ordinal) + " cannot access memory on device " +
                                       std::to_string(owner.id()) +
                                       " (cuDeviceCanAccessPeer answered 0: no peer path between them)");
    return ok();
}

}  // namespace

std::uint64_t granted_devices(const AccessGrant* grants, std::size_t count) noexcept {
    std::uint64_t devices = 0;
    for (std::size_t i = 0; i < count; ++i) {
        const Location& where = grants[i].location;
        if (where.kind() == LocationKind::Device && grants[i].flags != AccessFlags::None && where.id() >= 0 &&
            where.id() < 64)
            devices |= std::uint64_t{1} << where.id();
    }
    return devices;
}

bool host_granted(const AccessGrant* grants, std::size_t count, bool before) noexcept {
    bool granted = before;
    for (std::size_t i = 0; i < count; ++i)
        if (grants[i].location.is_host()) granted = grants[i].flags != AccessFlags::None;
    return granted;
}

Result<void> check_grants(const Location& owner, const AccessGrant* grants, std::size_t count) {
    if (grants == nullptr || count == 0)
        return Error::invalid_argument("access: give at least one (location, flags) grant");
    for (std::size_t i = 0; i < count; ++i) {
        const AccessGrant& grant = grants[i];
        // Built only when something is wrong: this runs on every map and grow.
        const auto what = [&grant, i] {
            return "access grant " + std::to_string(i) + " (" + grant.location.describe() + ")";
        };
        if (grant.location.id() < 0) CUDYN_TRY(grant.location.validate(what().c_str()));
        if (grant.flags != AccessFlags::None && grant.flags != AccessFlags::Read &&
            grant.flags != AccessFlags::ReadWrite)
            return Error::invalid_argument(what() + ": flags " + std::to_string(static_cast<int>(grant.flags)) +
                                           " are not None, Read or ReadWrite");
        for (std::size_t j = 0; j < i; ++j)
            if (grants[j].location == grant.location)
                return Error::invalid_argument(what() + ": the location is named twice (also grant " +
                                               std::to_string(j) + ")");
        const bool peer = grant.location.kind() == LocationKind::Device && grant.location != owner;
        if (peer && grant.flags != AccessFlags::None) {
            const std::string name = what();
            CUDYN_TRY(check_peer(owner, grant.location.id(), Operation(name.c_str())));
        }
    }
    return ok();
}

Result<void> apply_access(CUdeviceptr address, std::size_t bytes, const AccessGrant* grants, std::size_t count) {
    // Small lists stay on the stack: this runs once per map or grow.
    constexpr std::size_t kInline = 8;
    std::array<CUmemAccessDesc, kInline> inline_descriptors{};
    std::vector<CUmemAccessDesc> heap_descriptors;
    CUmemAccessDesc* descriptors = inline_descriptors.data();
    if (count > kInline) {
        heap_descriptors.resize(count);
        descriptors = heap_descriptors.data();
    }
    for (std::size_t i = 0; i < count; ++i) descriptors[i] = grants[i].to_cu();
    return call_driver(&DriverTable::cuMemSetAccess_v10020, address, bytes, descriptors, count);
}

}  // namespace detail

}  // namespace cudyn
