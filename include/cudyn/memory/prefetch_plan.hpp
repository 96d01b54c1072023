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
#pragma once

#include "cudyn/core/location.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/device/stream_ref.hpp"
#include "cudyn/memory/managed_range.hpp"

#include <cuda.h>

#include <cstddef>
#include <vector>

namespace cudyn {

class PrefetchPlan {
public:
    // Records a prefetch of `range` to `location`. A negative location id is
    // InvalidArgument now; the rest (device ordinals, CONCURRENT_MANAGED_ACCESS,
    // NUMA on a v1-only driver) is checked by execute().
    Result<void> add(const ManagedRange& range, const Location& location);

    std::size_t size() const noexcept { return entries_.size(); }
    bool empty() const noexcept { return entries_.empty(); }
    void clear() noexcept { entries_.clear(); }

    // Issues every recorded prefetch on `stream`. Every location is checked
    // before the first prefetch is issued. An empty plan is InvalidArgument.
    // One call per range: a failure part-way names how many were issued.
    Result<void> execute(StreamRef stream) const;
    // Synchronous: on the legacy default stream (one call per range: the
    // batch entry refuses that stream), returning once every range is done.
    Result<void> execute() const;

private:
    Result<void> issue(StreamRef stream) const;  // execute(stream) in the stream's context
    struct Entry {
        CUdeviceptr base;
        std::size_t bytes;
        Location location;
    };
    std::vector<Entry> entries_;
};

}  // namespace cudyn
