// cudyn — giving back a shared VMM record (Reservation, PhysicalHandle) when its last
// owner lets go; private to src/.
#pragma once

#include "cudyn/result.hpp"

#include <memory>

namespace cudyn::detail {

// Lets go of a shared VMM record (Reservation, PhysicalHandle): when this is
// its last owner, gives it back to the driver first and reports the answer;
// a refusal keeps `owner` as it was, so the caller may retry.
template <typename Record>
Result<void> let_go(std::shared_ptr<Record>& owner) {
    if (owner && owner.use_count() == 1) CUDYN_TRY(owner->give_back());
    owner.reset();
    return ok();
}

}  // namespace cudyn::detail
