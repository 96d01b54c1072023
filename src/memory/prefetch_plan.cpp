// cudyn — PrefetchPlan: one cuMemPrefetchBatchAsync where the driver and the
// stream allow it, one prefetch per range otherwise.
#include "cudyn/memory/prefetch_plan.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "core/internal.hpp"
#include "device/internal.hpp"
#include "device/device_facts.hpp"
#include "memory/internal.hpp"

#include <algorithm>
#include <utility>

namespace cudyn {

namespace {

constexpr detail::Operation kExecute{"PrefetchPlan::execute"};

// cuMemPrefetchBatchAsync refuses the legacy NULL stream and requires
// CONCURRENT_MANAGED_ACCESS on every device of the system, not only the
// targets (cuda.h). Anything else falls back to per-range calls.
bool batch_usable(StreamRef stream, const std::vector<detail::PreparedLocation>& targets) {
    if (!has_entry(&DriverTable::cuMemPrefetchBatchAsync_v13000) || stream.is_legacy_default()) return false;
    for (const detail::PreparedLocation& target : targets)
        if (!target.location_abi) return false;
    auto count = detail::visible_device_count();
    if (!count) return false;
    for (int ordinal = 0; ordinal < *count; ++ordinal) {
        auto concurrent = detail::concurrent_managed_access(ordinal);
        if (!concurrent || !*concurrent) return false;
    }
    return true;
}

}  // namespace

Result<void> PrefetchPlan::add(const ManagedRange& range, const Location& location) {
    CUDYN_TRY(location.validate("PrefetchPlan::add: location"));
    entries_.push_back(Entry{range.device_address(), range.size_bytes(), location});
    return ok();
}

Result<void> PrefetchPlan::execute(StreamRef stream) const {
    if (entries_.empty()) return kExecute.invalid("the plan is empty");
    return detail::in_stream_context(stream, [&] { return issue(stream); });
}

Result<void> PrefetchPlan::issue(StreamRef stream) const {

    // Distinct locations in order of first appearance, each checked once.
    std::vector<Location> locations;
    std::vector<std::size_t> group(entries_.size());
    for (std::size_t i = 0; i < entries_.size(); ++i) {
        const auto found = std::find(locations.begin(), locations.end(), entries_[i].location);
        group[i] = static_cast<std::size_t>(found - locations.begin());
        if (found == locations.end()) locations.push_back(entries_[i].location);
    }
    std::vector<detail::PreparedLocation> targets;
    targets.reserve(locations.size());
    for (const Location& location : locations) {
        CUDYN_TRY_ASSIGN(auto target, detail::prepare_prefetch_location(location, "PrefetchPlan::execute: location"));
        targets.push_back(target);
    }

    if (!batch_usable(stream, targets)) {
        // A prefetch once issued cannot be taken back: a failure part-way says
        // how many ranges were issued before it.
        for (std::size_t i = 0; i < entries_.size(); ++i) {
            auto issued = detail::issue_prefetch(entries_[i].base, entries_[i].bytes, targets[group[i]], stream.handle());
            if (issued) continue;
            Error error = std::move(issued).error();
            detail::note_failed_step(error, "range", i, entries_.size());
            return error;
        }
        return ok();
    }

    // prefetchLocs[k] applies to ranges prefetchLocIdxs[k] .. prefetchLocIdxs[k+1]-1,
    // so the ranges are laid out grouped by location.
    std::vector<CUdeviceptr> pointers;
    std::vector<std::size_t> sizes;
    std::vector<CUmemLocation> batch_locations;
    std::vector<std::size_t> first_range;
    pointers.reserve(entries_.size());
    sizes.reserve(entries_.size());
    for (std::size_t k = 0; k < targets.size(); ++k) {
        first_range.push_back(pointers.size());
        batch_locations.push_back(targets[k].location);
        for (std::size_t i = 0; i < entries_.size(); ++i) {
            if (group[i] != k) continue;
            pointers.push_back(entries_[i].base);
            sizes.push_back(entries_[i].bytes);
        }
    }
    return call_driver(&DriverTable::cuMemPrefetchBatchAsync_v13000, pointers.data(), sizes.data(), pointers.size(),
                       batch_locations.data(), first_range.data(), batch_locations.size(), 0ull, stream.handle());
}

Result<void> PrefetchPlan::execute() const {
    return detail::finish_on_legacy_stream(execute(StreamRef(CU_STREAM_LEGACY)));
}

}  // namespace cudyn
