// cudyn — cuMemGetAllocationGranularity behind the checks (allocation_properties.cpp); private to src/.
#pragma once

#include "cudyn/allocation_properties.hpp"
#include "cudyn/result.hpp"

#include <cstddef>

namespace cudyn::detail {

// cuMemGetAllocationGranularity without the validation and support checks.
Result<std::size_t> query_granularity(const AllocationProperties& properties, Granularity which);

// The device whose attributes judge memory at `location`: a device location's
// own; for host memory the current context's device, device 0 when none is
// current (any other failure to ask is the driver's error).
// check_supported() asks it, and GrowableBuffer grants it access to host
// memory by default.
Result<int> judging_device(const Location& location);

}  // namespace cudyn::detail
