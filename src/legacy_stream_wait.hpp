// cudyn — the wait behind every synchronous call that enqueues device work
// (defined in device_span.cpp); private to src/.
#pragma once

#include "cudyn/result.hpp"

namespace cudyn::detail {

// What every synchronous cudyn call that enqueues device work does after
// `issued`: waits for the legacy default stream (cuStreamSynchronize), where
// the no-stream entries and cudyn's own synchronous forms put their work.
// The driver's no-stream memsets and device-to-device copies return before
// the device has done them (docs/measurements has the figures), a copy from
// pageable host memory once the source is staged; waiting makes "synchronous" mean done, and
// orders the call before any work the caller enqueues next, on any stream.
// (Copies to the host need no wait: the driver returns them done.)
Result<void> finish_on_legacy_stream(Result<void> issued);

}  // namespace cudyn::detail
