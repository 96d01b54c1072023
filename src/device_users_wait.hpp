// cudyn — what a VMM owner waits for before it unmaps (Teardown::WaitForDevice;
// mapped_range.cpp); private to src/.
#pragma once

#include "cudyn/owner_context.hpp"
#include "cudyn/result.hpp"

#include <cstdint>

namespace cudyn::detail {

// What Teardown::WaitForDevice waits for before an unmap: `owner` (the
// context the memory was mapped in; the current one when it is empty) is
// synchronized, and so is the primary context of every other device in
// `devices` that is active (inactive ones run no work). Every context is
// synchronized even when one fails; the first error is returned.
Result<void> wait_for_device_users(const OwnerContext& owner, std::uint64_t devices);

}  // namespace cudyn::detail
