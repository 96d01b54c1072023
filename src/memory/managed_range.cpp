// cudyn — ManagedRange: advice and prefetch through whichever location
// ABI the driver has.
#include "cudyn/memory/managed_range.hpp"
#include "cudyn/detail/size_checks.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/loader.hpp"
#include "core/internal.hpp"
#include "device/internal.hpp"
#include "device/device_facts.hpp"
#include "memory/internal.hpp"

#include <string>
#include <vector>

namespace cudyn {

namespace detail {

namespace {

// The driver ignores the location of these; cudyn passes the host, valid on every ABI.
bool advice_takes_no_location(CUmem_advise advice) noexcept {
    return advice == CU_MEM_ADVISE_SET_READ_MOSTLY || advice == CU_MEM_ADVISE_UNSET_READ_MOSTLY ||
           advice == CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION;
}

// Checks and translates `location` for the ABI in use. `v1_entry` names the
// v1 entry in the NotSupported a NUMA target gets on a v1-only driver.
Result<PreparedLocation> prepare_location(const Location& location, const char* what, bool location_abi,
                                          const char* v1_entry) {
    CUDYN_TRY(location.validate(what));
    // With no usable driver neither ABI is resolved: say why, not
    // "NotSupported". (A resolved _v2 entry already says the driver is usable.)
    if (!location_abi) CUDYN_TRY(driver_status());
    PreparedLocation prepared;
    prepared.location_abi = location_abi;
    if (location_abi) {
        prepared.location = location.to_cu();
    } else {
        CUDYN_TRY_ASSIGN(auto legacy, location.to_legacy_device(v1_entry));
        prepared.legacy_device = legacy;
    }
    if (location.kind() == LocationKind::Device) {
        CUDYN_TRY_ASSIGN(auto count, visible_device_count());
        if (location.id() >= count)
            return Operation(what).invalid(location.describe() + " is out of range: " + std::to_string(count) +
                                           " device(s) visible");
    }
    return prepared;
}

// CUDA requires CONCURRENT_MANAGED_ACCESS of a device that managed memory is
// prefetched to, preferred on or mapped for (cuMemAdvise's and
// cuMemPrefetchAsync's documentation); drivers answer a bare
// CUDA_ERROR_INVALID_DEVICE otherwise, so it is checked first and named.
Result<void> require_concurrent_managed_access(const Location& location, const char* entry, const char* what,
                                               const char* consequence) {
    CUDYN_TRY_ASSIGN(auto concurrent, concurrent_managed_access(location.id()));
    if (!concurrent)
        return Operation(what).not_supported(
            entry, location.describe() + " lacks CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: " + consequence);
    return ok();
}

}  // namespace

Result<PreparedLocation> prepare_advice_location(CUmem_advise advice, const Location& given, const char* what) {
    const Location& location = advice_takes_no_location(advice) ? Location::host() : given;
    auto prepared = prepare_location(location, what, has_entry(&DriverTable::cuMemAdvise_v12020), "cuMemAdvise");
    const bool needs_concurrent_access =
        advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION || advice == CU_MEM_ADVISE_SET_ACCESSED_BY;
    if (!prepared || location.kind() != LocationKind::Device || !needs_concurrent_access) return prepared;
    CUDYN_TRY(require_concurrent_managed_access(location, prepared->location_abi ? "cuMemAdvise_v2" : "cuMemAdvise",
                                                what, "it cannot be a managed range's preferred location or mapping"));
    return prepared;
}

std::string describe_advice(const ManagedAdvice& step) {
    switch (step.advice) {
        case CU_MEM_ADVISE_SET_READ_MOSTLY: return "read-mostly set";
        case CU_MEM_ADVISE_UNSET_READ_MOSTLY: return "read-mostly unset";
        case CU_MEM_ADVISE_SET_PREFERRED_LOCATION: return "preferred location set to " + step.location.describe();
        case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION: return "preferred location unset";
        case CU_MEM_ADVISE_SET_ACCESSED_BY: return "accessed by " + step.location.describe() + " set";
        case CU_MEM_ADVISE_UNSET_ACCESSED_BY: return "accessed by " + step.location.describe() + " unset";
        default: return "advice " + std::to_string(static_cast<int>(step.advice));
    }
}

Result<void> issue_advice(CUdeviceptr base, std::size_t bytes, CUmem_advise advice, const PreparedLocation& target) {
    if (target.location_abi) return call_driver(&DriverTable::cuMemAdvise_v12020, base, bytes, advice, target.location);
    return call_driver(&DriverTable::cuMemAdvise_v8000, base, bytes, advice, target.legacy_device);
}

Result<PreparedLocation> prepare_prefetch_location(const Location& location, const char* what) {
    auto prepared =
        prepare_location(location, what, has_entry(&DriverTable::cuMemPrefetchAsync_v12020), "cuMemPrefetchAsync");
    if (!prepared || location.kind() != LocationKind::Device) return prepared;
    CUDYN_TRY(require_concurrent_managed_access(location,
                                                prepared->location_abi ? "cuMemPrefetchAsync_v2" : "cuMemPrefetchAsync",
                                                what, "managed memory cannot be prefetched to it"));
    return prepared;
}

Result<void> issue_prefetch(CUdeviceptr base, std::size_t bytes, const PreparedLocation& target, CUstream stream) {
    if (target.location_abi)
        return call_driver(&DriverTable::cuMemPrefetchAsync_v12020, base, bytes, target.location, 0u, stream);
    return call_driver(&DriverTable::cuMemPrefetchAsync_v8000, base, bytes, target.legacy_device, stream);
}

}  // namespace detail

Result<ManagedRange> ManagedRange::over(CUdeviceptr base, std::size_t bytes) {
    constexpr detail::Operation kOver{"ManagedRange::over"};
    if (base == 0) return kOver.invalid("base is a null pointer");
    if (bytes == 0) return kOver.invalid("bytes must be non-zero");
    CUDYN_TRY(detail::check_address_range(base, bytes, kOver.name()));
    return ManagedRange(base, bytes);
}

Result<ManagedRange> ManagedRange::subrange(std::size_t offset, std::size_t bytes) const {
    CUDYN_TRY(detail::check_range(offset, bytes, bytes_, "ManagedRange::subrange"));
    return ManagedRange(base_ + offset, bytes);
}

namespace {

// Whether prepare_advice_location would accept `location` for `advice` on a
// driver with cuMemAdvise_v2, judged from the cached device facts alone
// (never asking the driver); false sends the advice through the checking
// path, which also fills the cache. The location-free advices take the host.
bool known_good_v2_advice(CUmem_advise advice, const Location& location) noexcept {
    if (detail::advice_takes_no_location(advice)) return true;
    if (location.id() < 0) return false;
    if (location.kind() != LocationKind::Device) return true;
    if (advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION || advice == CU_MEM_ADVISE_SET_ACCESSED_BY)
        return detail::known_concurrent_managed_device(location.id());
    return detail::known_visible_device(location.id());
}

// Out of line, so that advise_one's direct path keeps a small frame (this
// one stages a PreparedLocation and an Error-capable Result on the stack).
CUDYN_DETAIL_COLD Result<void> advise_checked(CUdeviceptr base, std::size_t bytes, CUmem_advise advice,
                                              const Location& location) {
    CUDYN_TRY_ASSIGN(auto target, detail::prepare_advice_location(advice, location, "ManagedRange::advise: location"));
    return detail::issue_advice(base, bytes, advice, target);
}

}  // namespace

Result<void> ManagedRange::advise_one(CUmem_advise advice, const Location& location) const {
    // The named setters are called in loops, next to a driver call of under a
    // microsecond. Once the device facts are cached, every check the general
    // path makes (validate, count, CONCURRENT_MANAGED_ACCESS) is known to
    // pass, so the common case calls cuMemAdvise_v2 directly instead of
    // staging a PreparedLocation in a Result (about a quarter of the
    // instructions, callgrind on the emulated fake).
    const DriverTable* table = detail::usable_driver();
    const auto advise_v2 = table != nullptr ? table->cuMemAdvise_v12020 : nullptr;
    if (advise_v2 != nullptr && known_good_v2_advice(advice, location)) {
        const CUmemLocation target =
            detail::advice_takes_no_location(advice) ? Location::host().to_cu() : location.to_cu();
        const CUresult result = advise_v2(base_, bytes_, advice, target);
        if (result != CUDA_SUCCESS) return detail::call_failed(result, &DriverTable::cuMemAdvise_v12020);
        return ok();
    }
    return advise_checked(base_, bytes_, advice, location);
}

Result<void> ManagedRange::advise(std::initializer_list<ManagedAdvice> advices) const {
    constexpr detail::Operation kAdvise{"ManagedRange::advise"};
    // Every advice is prepared before the first is issued.
    std::vector<detail::PreparedLocation> prepared;
    prepared.reserve(advices.size());
    for (const ManagedAdvice& step : advices) {
        if (step.advice < CU_MEM_ADVISE_SET_READ_MOSTLY || step.advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY)
            return kAdvise.invalid("advice " + std::to_string(static_cast<int>(step.advice)) +
                                   " is not a CUmem_advise");
        CUDYN_TRY_ASSIGN(auto target, detail::prepare_advice_location(step.advice, step.location,
                                                                      "ManagedRange::advise: location"));
        prepared.push_back(target);
    }
    // Advice cannot be taken back (the driver does not say what a range had
    // before), so a failure part-way names exactly what stayed applied.
    for (std::size_t i = 0; i < prepared.size(); ++i) {
        auto issued = detail::issue_advice(base_, bytes_, advices.begin()[i].advice, prepared[i]);
        if (issued) continue;
        Error error = std::move(issued).error();
        error.message += " (advice " + std::to_string(i + 1) + " of " + std::to_string(prepared.size()) + ", " +
                         detail::describe_advice(advices.begin()[i]) + ", failed; ";
        if (i == 0) {
            error.message += "nothing was applied)";
        } else {
            error.message += "still in effect: ";
            for (std::size_t k = 0; k < i; ++k)
                error.message += (k ? ", " : "") + detail::describe_advice(advices.begin()[k]);
            error.message += ")";
        }
        return error;
    }
    return ok();
}

Result<void> ManagedRange::set_read_mostly() const {
    return advise_one(CU_MEM_ADVISE_SET_READ_MOSTLY, Location::host());
}
Result<void> ManagedRange::unset_read_mostly() const {
    return advise_one(CU_MEM_ADVISE_UNSET_READ_MOSTLY, Location::host());
}
Result<void> ManagedRange::set_preferred_location(const Location& location) const {
    return advise_one(CU_MEM_ADVISE_SET_PREFERRED_LOCATION, location);
}
Result<void> ManagedRange::unset_preferred_location() const {
    return advise_one(CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, Location::host());
}
Result<void> ManagedRange::set_accessed_by(const Location& location) const {
    return advise_one(CU_MEM_ADVISE_SET_ACCESSED_BY, location);
}
Result<void> ManagedRange::unset_accessed_by(const Location& location) const {
    return advise_one(CU_MEM_ADVISE_UNSET_ACCESSED_BY, location);
}

Result<void> ManagedRange::prefetch_to(const Location& location, StreamRef stream) const {
    CUDYN_TRY_ASSIGN(auto target, detail::prepare_prefetch_location(location, "ManagedRange::prefetch_to: location"));
    return detail::in_stream_context(stream,
                                     [&] { return detail::issue_prefetch(base_, bytes_, target, stream.handle()); });
}

Result<void> ManagedRange::prefetch_to(const Location& location) const {
    return detail::finish_on_legacy_stream(prefetch_to(location, StreamRef(CU_STREAM_LEGACY)));
}

Result<void> ManagedRange::prefetch_range(std::size_t offset, std::size_t bytes, const Location& location,
                                                StreamRef stream) const {
    CUDYN_TRY(detail::check_range(offset, bytes, bytes_, "ManagedRange::prefetch_range"));
    return ManagedRange(base_ + offset, bytes).prefetch_to(location, stream);
}

Result<void> ManagedRange::prefetch_range(std::size_t offset, std::size_t bytes,
                                                const Location& location) const {
    return detail::finish_on_legacy_stream(prefetch_range(offset, bytes, location, StreamRef(CU_STREAM_LEGACY)));
}

}  // namespace cudyn
