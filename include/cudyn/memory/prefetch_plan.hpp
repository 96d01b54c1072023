// cudyn — PrefetchPlan: many (range, location) prefetches recorded once and
// issued together on a stream.
//
// execute() makes one cuMemPrefetchBatchAsync call (driver 13.0+) where it
// can: the entry is resolved, the stream is not the legacy NULL stream (which
// the batch entry refuses), and every device reports
// CONCURRENT_MANAGED_ACCESS (which it requires). Otherwise it makes one
// prefetch call per range, in the order recorded. Within a batch the driver
// gives no order, so ranges are grouped by location (prefetchLocs /
// prefetchLocIdxs) regardless of the order they were added in.
//
// Discarding a range tells the driver its contents are no longer needed: it
// may drop them instead of migrating them, and until the range is written or
// prefetched again, reading it gives indeterminate bytes (the old ones, or
// anything else). A discard is never a way to clear memory. Discards run
// through cuMemDiscardBatchAsync (13.0) and discards-with-prefetch through
// cuMemDiscardAndPrefetchBatchAsync where the batch could run (the same
// conditions as the prefetch batch); otherwise a discard issues nothing (the
// contents stay, one of the outcomes a discard allows) and a
// discard-with-prefetch is a prefetch. execute() issues, in stream order,
// the discards, then the discards-with-prefetch, then the prefetches; within
// each group there is no order.
#pragma once

#include "cudyn/core/location.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/device/stream_ref.hpp"
#include "cudyn/memory/managed_range.hpp"

#include <cuda.h>

#include <cstddef>
#include <vector>

namespace cudyn {

namespace detail {
// One recorded operation of a prefetch plan (the location unused for a discard).
struct PrefetchEntry {
    CUdeviceptr base;
    std::size_t bytes;
    Location location;
};
}  // namespace detail

class PrefetchPlan {
public:
    // Records a prefetch of `range` to `location`. A negative location id is
    // InvalidArgument now; the rest (device ordinals, CONCURRENT_MANAGED_ACCESS,
    // NUMA on a v1-only driver) is checked by execute().
    Result<void> add(const ManagedRange& range, const Location& location);

    // Records a discard of `range`: its contents become indeterminate.
    Result<void> add_discard(const ManagedRange& range);
    // Records a discard of `range` and a prefetch of it to `location`: the
    // pages arrive there without their old contents being migrated.
    Result<void> add_discard_and_prefetch(const ManagedRange& range, const Location& location);

    // Operations of every kind.
    std::size_t size() const noexcept { return entries_.size() + discards_.size() + discard_prefetches_.size(); }
    bool empty() const noexcept { return size() == 0; }
    void clear() noexcept {
        entries_.clear();
        discards_.clear();
        discard_prefetches_.clear();
    }

    // Issues every recorded prefetch on `stream`. Every location is checked
    // before the first prefetch is issued. An empty plan is InvalidArgument.
    // One call per range: a failure part-way names how many were issued.
    Result<void> execute(StreamRef stream) const;
    // Synchronous: on the legacy default stream (one call per range: the
    // batch entry refuses that stream), returning once every range is done.
    Result<void> execute() const;

private:
    using Entry = detail::PrefetchEntry;
    Result<void> issue(StreamRef stream) const;  // execute(stream) in the stream's context
    std::vector<Entry> entries_;             // prefetches
    std::vector<Entry> discards_;            // discards (location unused)
    std::vector<Entry> discard_prefetches_;  // discards with a prefetch
};

}  // namespace cudyn
