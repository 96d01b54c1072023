// cudyn — range-wide access: the reservation's record of its mappings says
// what is mapped and where the memory lives; one cuMemSetAccess sets it all.
#include "cudyn/vmm/range_access.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "core/internal.hpp"
#include "vmm/internal.hpp"

#include <map>
#include <string>

namespace cudyn {

namespace {

constexpr detail::Operation kSetRange{"set_range_access"};
constexpr detail::Operation kRangeAccess{"range_access"};
constexpr detail::Operation kRangeSpan{"range_span_as"};

using Mappings = std::map<std::size_t, detail::Reservation::Mapping>;

// The mappings covering [offset, offset + bytes) of `range`, or
// InvalidArgument naming the first unmapped byte.
Result<Mappings> mappings_over(const detail::Operation& op, const AddressRange& range, std::size_t offset,
                               std::size_t bytes) {
    if (range.empty()) return op.invalid("the range is empty (moved from or freed)");
    CUDYN_TRY(detail::check_inside_allocation(op, offset, bytes, range.size_bytes()));
    if (bytes == 0) return op.invalid("0 bytes");
    Mappings mappings;
    std::size_t hole = 0;
    if (!detail::VmmAccess::reservation(range)->covering(offset, bytes, &mappings, &hole))
        return op.invalid("byte " + std::to_string(hole) + " of the range (" +
                          detail::hex(range.device_address() + hole) + ") is not mapped");
    return mappings;
}

int rank(AccessFlags flags) noexcept {
    switch (flags) {
        case AccessFlags::ReadWrite: return 2;
        case AccessFlags::Read: return 1;
        default: return 0;
    }
}

Result<AccessFlags> access_of(CUdeviceptr address, const Location& location) {
    const CUmemLocation where = location.to_cu();
    unsigned long long flags = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemGetAccess_v10020, &flags, &where, address));
    return static_cast<AccessFlags>(flags);
}

Result<void> set_all(const AddressRange& range, const AccessGrant* grants, std::size_t count) {
    return detail::set_access_over(range, 0, range.size_bytes(), grants, count, kSetRange);
}

}  // namespace

Result<void> set_range_access(const AddressRange& range, std::initializer_list<AccessGrant> grants) {
    return set_all(range, grants.begin(), grants.size());
}

Result<void> set_range_access(const AddressRange& range, const std::vector<AccessGrant>& grants) {
    return set_all(range, grants.data(), grants.size());
}

Result<AccessFlags> range_access(const AddressRange& range, const Location& location) {
    CUDYN_TRY(location.validate("range_access: location"));
    CUDYN_TRY_ASSIGN(auto mappings, mappings_over(kRangeAccess, range, 0, range.size_bytes()));
    AccessFlags least = AccessFlags::ReadWrite;
    for (const auto& entry : mappings) {
        CUDYN_TRY_ASSIGN(auto flags, access_of(range.device_address() + entry.first, location));
        if (rank(flags) < rank(least)) least = flags;
    }
    return least;
}

namespace detail {

Result<void> set_access_over(const AddressRange& range, std::size_t offset, std::size_t bytes,
                             const AccessGrant* grants, std::size_t count, const Operation& op) {
    CUDYN_TRY(require_entry(&DriverTable::cuMemSetAccess_v10020));
    CUDYN_TRY_ASSIGN(auto mappings, mappings_over(op, range, offset, bytes));
    // Every mapping's memory is checked before anything is set.
    for (const auto& [at, mapping] : mappings) {
        auto checked = check_grants(mapping.location, grants, count);
        if (!checked) {
            Error error = op.context(std::move(checked).error());
            error.message += " (the mapping at offset " + std::to_string(at) + ")";
            return error;
        }
    }
    CUDYN_TRY(apply_access(range.device_address() + offset, bytes, grants, count));
    VmmAccess::reservation(range)->range_granted(mappings, grants, count, next_grant_seq());
    return ok();
}

Result<CUdeviceptr> checked_range_bytes(const AddressRange& range, std::size_t offset_bytes, std::size_t size_bytes,
                                        const Location& location, AccessFlags needed) {
    CUDYN_TRY(location.validate("range_span_as: location"));
    if (rank(needed) == 0 && needed != AccessFlags::None)
        return kRangeSpan.invalid("needed access " + std::to_string(static_cast<int>(needed)) + " is not an AccessFlags");
    CUDYN_TRY_ASSIGN(auto mappings, mappings_over(kRangeSpan, range, offset_bytes, size_bytes));
    for (const auto& entry : mappings) {
        CUDYN_TRY_ASSIGN(auto flags, access_of(range.device_address() + entry.first, location));
        if (rank(flags) < rank(needed))
            return kRangeSpan.invalid(location.describe() + " has " + to_string(flags) +
                                      " access to the mapping at offset " + std::to_string(entry.first) + ", not " +
                                      to_string(needed));
    }
    return range.device_address() + offset_bytes;
}

}  // namespace detail

}  // namespace cudyn
