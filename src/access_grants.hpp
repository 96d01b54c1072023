// cudyn — access grants of VMM mappings checked, applied and summed up
// (memory_access.cpp); private to src/.
#pragma once

#include "cudyn/location.hpp"
#include "cudyn/memory_access.hpp"
#include "cudyn/result.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>

namespace cudyn::detail {

// Checks grants for memory living at `owner` before anything is changed:
// at least one grant, valid locations and flags, and for a device other than a
// device owner: that it exists, supports VMM and can access the owner's memory
// (cuDeviceCanAccessPeer), else NotSupported naming the pair.
Result<void> check_grants(const Location& owner, const AccessGrant* grants, std::size_t count);
// cuMemSetAccess of already checked grants over [address, address + bytes).
Result<void> apply_access(CUdeviceptr address, std::size_t bytes, const AccessGrant* grants, std::size_t count);

// The devices whose work may use memory with these grants: bit d for device
// d, for every device granted more than no access.
std::uint64_t granted_devices(const AccessGrant* grants, std::size_t count) noexcept;

// Whether the host may touch the memory after these grants: the last grant
// naming a host location decides (any flags but None); `before` when none does.
bool host_granted(const AccessGrant* grants, std::size_t count, bool before) noexcept;

}  // namespace cudyn::detail
