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

// The batch entries refuse the legacy NULL stream and require
// CONCURRENT_MANAGED_ACCESS on every device of the system, not only the
// targets (cuda.h). Anything else falls back to per-range calls.
bool batch_usable(bool has_batch_entry, StreamRef stream) {
    if (!has_batch_entry || stream.is_legacy_default()) return false;
    auto count = detail::visible_device_count();
    if (!count) return false;
    for (int ordinal = 0; ordinal < *count; ++ordinal) {
        auto concurrent = detail::concurrent_managed_access(ordinal);
        if (!concurrent || !*concurrent) return false;
    }
    return true;
}

bool location_abi(const std::vector<detail::PreparedLocation>& targets) {
    for (const detail::PreparedLocation& target : targets)
        if (!target.location_abi) return false;
    return true;
}

}  // namespace

Result<void> PrefetchPlan::add(const ManagedRange& range, const Location& location) {
    CUDYN_TRY(location.validate("PrefetchPlan::add: location"));
    entries_.push_back(Entry{range.device_address(), range.size_bytes(), location});
    return ok();
}

Result<void> PrefetchPlan::add_discard(const ManagedRange& range) {
    discards_.push_back(Entry{range.device_address(), range.size_bytes(), Location::host()});
    return ok();
}

Result<void> PrefetchPlan::add_discard_and_prefetch(const ManagedRange& range, const Location& location) {
    CUDYN_TRY(location.validate("PrefetchPlan::add_discard_and_prefetch: location"));
    discard_prefetches_.push_back(Entry{range.device_address(), range.size_bytes(), location});
    return ok();
}

Result<void> PrefetchPlan::execute(StreamRef stream) const {
    if (empty()) return kExecute.invalid("the plan is empty");
    return detail::in_stream_context(stream, [&] { return issue(stream); });
}

// Distinct locations in order of first appearance, each checked once, and
// which one each range goes to.
namespace {

using Entry = detail::PrefetchEntry;

// The checked locations of a group of entries and which one each takes.
struct Targets {
    std::vector<detail::PreparedLocation> targets;
    std::vector<std::size_t> group;
};

Result<Targets> prepare(const std::vector<Entry>& entries) {
    Targets prepared;
    std::vector<Location> locations;
    prepared.group.resize(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
        const auto found = std::find(locations.begin(), locations.end(), entries[i].location);
        prepared.group[i] = static_cast<std::size_t>(found - locations.begin());
        if (found == locations.end()) locations.push_back(entries[i].location);
    }
    prepared.targets.reserve(locations.size());
    for (const Location& location : locations) {
        CUDYN_TRY_ASSIGN(auto target, detail::prepare_prefetch_location(location, "PrefetchPlan::execute: location"));
        prepared.targets.push_back(target);
    }
    return prepared;
}

// One cuMemDiscardBatchAsync; without it, nothing: a discard only allows the
// driver to drop the contents, so leaving them is one of its outcomes.
Result<void> issue_discards(const std::vector<Entry>& discards, StreamRef stream) {
    if (!batch_usable(has_entry(&DriverTable::cuMemDiscardBatchAsync_v13000), stream)) return ok();
    std::vector<CUdeviceptr> pointers;
    std::vector<std::size_t> sizes;
    for (const Entry& entry : discards) {
        pointers.push_back(entry.base);
        sizes.push_back(entry.bytes);
    }
    return call_driver(&DriverTable::cuMemDiscardBatchAsync_v13000, pointers.data(), sizes.data(), pointers.size(),
                       0ull, stream.handle());
}

Result<void> issue_prefetches(const std::vector<Entry>& entries, const Targets& prepared, bool discard,
                              StreamRef stream) {
    const std::vector<detail::PreparedLocation>& targets = prepared.targets;
    const bool batch =
        location_abi(targets) &&
        batch_usable(discard ? has_entry(&DriverTable::cuMemDiscardAndPrefetchBatchAsync_v13000)
                             : has_entry(&DriverTable::cuMemPrefetchBatchAsync_v13000),
                     stream);
    if (!batch) {
        // A discard-and-prefetch falls back to the prefetch: the bytes it
        // brings are the old ones, which a discard allowed but did not require
        // to change. A prefetch once issued cannot be taken back: a failure
        // part-way says how many ranges were issued before it.
        for (std::size_t i = 0; i < entries.size(); ++i) {
            auto issued =
                detail::issue_prefetch(entries[i].base, entries[i].bytes, targets[prepared.group[i]], stream.handle());
            if (issued) continue;
            Error error = std::move(issued).error();
            detail::note_failed_step(error, "range", i, entries.size());
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
    pointers.reserve(entries.size());
    sizes.reserve(entries.size());
    for (std::size_t k = 0; k < targets.size(); ++k) {
        first_range.push_back(pointers.size());
        batch_locations.push_back(targets[k].location);
        for (std::size_t i = 0; i < entries.size(); ++i) {
            if (prepared.group[i] != k) continue;
            pointers.push_back(entries[i].base);
            sizes.push_back(entries[i].bytes);
        }
    }
    const auto entry = discard ? &DriverTable::cuMemDiscardAndPrefetchBatchAsync_v13000
                               : &DriverTable::cuMemPrefetchBatchAsync_v13000;
    return call_driver(entry, pointers.data(), sizes.data(), pointers.size(), batch_locations.data(),
                       first_range.data(), batch_locations.size(), 0ull, stream.handle());
}

}  // namespace

Result<void> PrefetchPlan::issue(StreamRef stream) const {
    // Every location is checked before anything is issued.
    CUDYN_TRY_ASSIGN(const Targets discard_targets, prepare(discard_prefetches_));
    CUDYN_TRY_ASSIGN(const Targets prefetch_targets, prepare(entries_));
    if (!discards_.empty()) CUDYN_TRY(issue_discards(discards_, stream));
    if (!discard_prefetches_.empty()) CUDYN_TRY(issue_prefetches(discard_prefetches_, discard_targets, true, stream));
    if (!entries_.empty()) CUDYN_TRY(issue_prefetches(entries_, prefetch_targets, false, stream));
    return ok();
}

Result<void> PrefetchPlan::execute() const {
    return detail::finish_on_legacy_stream(execute(StreamRef(CU_STREAM_LEGACY)));
}

}  // namespace cudyn
