// cudyn — where memory lives or should go: a device, the host, or a host NUMA
// node. One type for advice, prefetch, VMM placement and access.
#pragma once

#include "cudyn/core/result.hpp"

#include <cuda.h>

#include <string>

namespace cudyn {

enum class LocationKind {
    Device,           // device ordinal id
    Host,             // host memory, no particular node
    HostNuma,         // host NUMA node id
    HostNumaCurrent,  // the NUMA node of the calling thread
};

class Location {
public:
    static Location device(int ordinal) noexcept { return Location(LocationKind::Device, ordinal); }
    static Location host() noexcept { return Location(LocationKind::Host, 0); }
    static Location host_numa(int node) noexcept { return Location(LocationKind::HostNuma, node); }
    static Location host_numa_current() noexcept { return Location(LocationKind::HostNumaCurrent, 0); }

    LocationKind kind() const noexcept { return kind_; }
    // The device ordinal or NUMA node; 0 (ignored by the driver) for Host and HostNumaCurrent.
    int id() const noexcept { return id_; }
    bool is_host() const noexcept { return kind_ != LocationKind::Device; }

    // InvalidArgument naming `what` when the id is negative.
    Result<void> validate(const char* what) const {
        if (id_ < 0) return invalid_error(what);
        return ok();
    }

    // The CUmemLocation with type and id both set: a zeroed CUmemLocation
    // silently means device 0, a bug peers have shipped.
    CUmemLocation to_cu() const noexcept;
    // The pre-12.2 CUdevice form used by the v1 advise/prefetch ABIs: a device
    // ordinal, or CU_DEVICE_CPU for the host. NUMA targets have no such form:
    // NotSupported naming `entry`.
    Result<CUdevice> to_legacy_device(const char* entry) const;

    // "device 1", "host", "host NUMA node 0", "host NUMA current".
    std::string describe() const;

    friend bool operator==(const Location& a, const Location& b) noexcept {
        return a.kind_ == b.kind_ && a.id_ == b.id_;
    }
    friend bool operator!=(const Location& a, const Location& b) noexcept { return !(a == b); }

private:
    Location(LocationKind kind, int id) noexcept : kind_(kind), id_(id) {}
    Error invalid_error(const char* what) const;  // out of line: the rare path
    LocationKind kind_;
    int id_;
};

}  // namespace cudyn
