// cudyn — Location: conversions to the driver's two location ABIs.
#include "cudyn/core/location.hpp"
#include "core/internal.hpp"

#include <string>

namespace cudyn {

Error Location::invalid_error(const char* what) const {
    return detail::Operation(what).invalid(describe() + " is not valid (negative " +
                                           (kind_ == LocationKind::Device ? "device ordinal" : "NUMA node") + ")");
}

CUmemLocation Location::to_cu() const noexcept {
    CUmemLocation location{};
    switch (kind_) {
        case LocationKind::Device: location.type = CU_MEM_LOCATION_TYPE_DEVICE; break;
        case LocationKind::Host: location.type = CU_MEM_LOCATION_TYPE_HOST; break;
        case LocationKind::HostNuma: location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA; break;
        case LocationKind::HostNumaCurrent: location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT; break;
    }
    location.id = id_;
    return location;
}

Result<CUdevice> Location::to_legacy_device(const char* entry) const {
    switch (kind_) {
        case LocationKind::Device: return CUdevice{id_};
        case LocationKind::Host: return CUdevice{CU_DEVICE_CPU};
        case LocationKind::HostNuma:
        case LocationKind::HostNumaCurrent: break;
    }
    return Error::not_supported(entry, describe() + " needs the CUmemLocation ABI (driver 12.2+); this driver only has " +
                                           entry + ", which takes a device or the CPU");
}

std::string Location::describe() const {
    switch (kind_) {
        case LocationKind::Device: return "device " + std::to_string(id_);
        case LocationKind::Host: return "host";
        case LocationKind::HostNuma: return "host NUMA node " + std::to_string(id_);
        case LocationKind::HostNumaCurrent: return "host NUMA current";
    }
    return "unknown location";
}

}  // namespace cudyn
