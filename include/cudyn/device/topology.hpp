// cudyn — how the visible devices are connected, from the driver's own
// answers: for every ordered pair, whether peer access can be enabled and
// what the link offers (the P2P attributes, and where the driver has them
// the per-operation atomic capabilities).
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/peer_access.hpp"

#include <vector>

namespace cudyn {

// Device `from` reaching device `to`'s memory.
struct PeerLink {
    int from = 0;
    int to = 0;
    bool can_access_peer = false;  // cuDeviceCanAccessPeer
    PeerAttributes attributes;     // cuDeviceGetP2PAttribute
    // cuDeviceGetP2PAtomicCapabilities (CUDA 13.0): for each CUatomicOperation
    // in enum order, its CU_ATOMIC_CAPABILITY_* bits over this link. Empty
    // where the driver lacks the entry.
    std::vector<unsigned int> atomic_capabilities;
};

struct Topology {
    int device_count = 0;
    // Every ordered pair of distinct devices, by `from` then `to`.
    std::vector<PeerLink> links;

    // The link from -> to; null for the same device twice or an ordinal out of range.
    const PeerLink* link(int from, int to) const noexcept;
    // Every ordered pair can enable peer access (true with fewer than two devices).
    bool all_pairs_peer_access() const noexcept;
};

// Asks the driver about every ordered pair of visible devices. Fails with the
// first query that fails, naming the pair.
Result<Topology> probe_topology();

}  // namespace cudyn
