// cudyn — cuMemGetAllocationGranularity behind the checks (allocation_properties.cpp); private to src/.
#pragma once

#include "cudyn/allocation_properties.hpp"
#include "cudyn/result.hpp"

#include <cstddef>

namespace cudyn::detail {

// cuMemGetAllocationGranularity without the validation and support checks.
Result<std::size_t> query_granularity(const AllocationProperties& properties, Granularity which);

}  // namespace cudyn::detail
