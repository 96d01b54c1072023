// cudyn — peer access between two devices' contexts, and what the driver
// says about each pair (cuDeviceGetP2PAttribute).
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/device/primary_context.hpp"

namespace cudyn {

// What the driver reports for device `from` reaching device `to`'s memory.
struct PeerAttributes {
    // Relative performance of the link (CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK):
    // a lower rank is a faster link; only meaningful where access is supported.
    int performance_rank = 0;
    bool access_supported = false;         // ..._ACCESS_SUPPORTED
    bool native_atomic_supported = false;  // ..._NATIVE_ATOMIC_SUPPORTED
    bool cuda_array_access_supported = false;  // ..._CUDA_ARRAY_ACCESS_SUPPORTED (false where the driver lacks it)
};

// cuDeviceGetP2PAttribute for each attribute above. InvalidArgument, before
// the driver, when `from` and `to` are the same device.
Result<PeerAttributes> peer_attributes(const Device& from, const Device& to);

// Lets kernels and copies in `from`'s context reach memory of `to`'s context
// directly (cuCtxEnablePeerAccess, made with `from` current; the caller's
// context is put back). Access is one way: enable the other direction too
// where both devices read each other's memory. Idempotent: access already
// enabled is success, at the cost of the raw call. InvalidArgument, before
// the driver, for an empty context or the same device on both sides; a pair
// the driver refuses is NotSupported naming the pair where
// cuDeviceCanAccessPeer says no (asked only then), else the driver's error.
// The access lasts while both contexts do.
Result<void> enable_peer_access(const PrimaryContext& from, const PrimaryContext& to);

// cuCtxDisablePeerAccess, with `from` current. Idempotent: access not enabled
// is success. InvalidArgument as above.
Result<void> disable_peer_access(const PrimaryContext& from, const PrimaryContext& to);

}  // namespace cudyn
