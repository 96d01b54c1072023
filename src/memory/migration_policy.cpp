// cudyn — MigrationPolicy: one policy, two advices, checked before either.
#include "cudyn/memory/migration_policy.hpp"

namespace cudyn {

std::optional<Location> MigrationPolicy::preferred_location() const {
    switch (kind_) {
        case Kind::PreferDevice: return Location::device(id_);
        // The host itself, never a zeroed location (which would mean device 0).
        case Kind::PreferHost: return Location::host();
        case Kind::PreferHostNuma: return Location::host_numa(id_);
        case Kind::Default:
        case Kind::ReadMostly: break;
    }
    return std::nullopt;
}

std::string MigrationPolicy::describe() const {
    switch (kind_) {
        case Kind::Default: return "default";
        case Kind::ReadMostly: return "read mostly";
        case Kind::PreferDevice:
        case Kind::PreferHost:
        case Kind::PreferHostNuma: return "prefer " + preferred_location()->describe();
    }
    return "unknown policy";
}

Result<void> MigrationPolicy::apply_to(const ManagedRange& range) const {
    const CUmem_advise read_mostly =
        kind_ == Kind::ReadMostly ? CU_MEM_ADVISE_SET_READ_MOSTLY : CU_MEM_ADVISE_UNSET_READ_MOSTLY;
    const std::optional<Location> preferred = preferred_location();
    if (preferred)
        return range.advise({{read_mostly, Location::host()}, {CU_MEM_ADVISE_SET_PREFERRED_LOCATION, *preferred}});
    return range.advise({{read_mostly, Location::host()}, {CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, Location::host()}});
}

}  // namespace cudyn
