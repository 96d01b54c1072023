// cudyn — MigrationPolicy: where a managed range should live, as one choice
// applied in one call instead of a sequence of advices to get right.
//
//     CUDYN_TRY(cudyn::MigrationPolicy::prefer_host().apply_to(*buffer.managed_range()));
#pragma once

#include "cudyn/core/location.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/memory/managed_range.hpp"

#include <optional>
#include <string>

namespace cudyn {

class MigrationPolicy {
public:
    enum class Kind {
        Default,         // no read-mostly, no preferred location: the driver decides
        ReadMostly,      // replicated read-only copies where read; no preferred location
        PreferDevice,    // pages stay on device n
        PreferHost,      // pages stay in host memory (CU_MEM_LOCATION_TYPE_HOST / CU_DEVICE_CPU)
        PreferHostNuma,  // pages stay on host NUMA node n (driver 12.2+)
    };

    static MigrationPolicy driver_default() noexcept { return MigrationPolicy(Kind::Default, 0); }
    static MigrationPolicy read_mostly() noexcept { return MigrationPolicy(Kind::ReadMostly, 0); }
    static MigrationPolicy prefer_device(int ordinal) noexcept { return MigrationPolicy(Kind::PreferDevice, ordinal); }
    static MigrationPolicy prefer_host() noexcept { return MigrationPolicy(Kind::PreferHost, 0); }
    static MigrationPolicy prefer_host_numa(int node) noexcept { return MigrationPolicy(Kind::PreferHostNuma, node); }

    Kind kind() const noexcept { return kind_; }
    // The preferred location the policy sets; empty for Default and ReadMostly.
    std::optional<Location> preferred_location() const;
    std::string describe() const;

    // Gives `range` exactly this policy: read-mostly set or unset, and the
    // preferred location set or unset (accessed-by advice is left alone).
    // Both locations are checked before the first advice, so NotSupported
    // (a NUMA node on a v1-only driver) or InvalidArgument leaves the range
    // untouched.
    Result<void> apply_to(const ManagedRange& range) const;

private:
    MigrationPolicy(Kind kind, int id) noexcept : kind_(kind), id_(id) {}
    Kind kind_;
    int id_;
};

}  // namespace cudyn
