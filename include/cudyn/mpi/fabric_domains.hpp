// cudyn — the ranks of a job grouped by NVLink fabric domain (cluster UUID and
// clique), and which pairs of ranks could share memory through fabric
// handles: the same domain, healthy on both, and the fabric export trial
// working on both. Unlike legacy IPC, that reach crosses hosts. Needs no MPI.
#pragma once

#include "cudyn/device/device_identity.hpp"
#include "cudyn/mpi/rank_record.hpp"

#include <utility>
#include <vector>

namespace cudyn::mpi {

struct FabricDomains {
    struct Domain {
        DeviceUuid cluster_uuid;
        unsigned int clique_id = 0;
        std::vector<int> ranks;  // ascending
    };
    // Numbered in the order of each one's lowest rank, as hosts are.
    std::vector<Domain> domains;
    // Per rank: the index into domains, -1 for a rank in none. A rank's
    // domain is its first device's that reported one.
    std::vector<int> domain_of_rank;
    // Ordered pairs (a < b) of ranks that could share memory through fabric
    // handles: same domain, both devices healthy, and `fabric_export` worked
    // on both (a rank whose trials did not run is not counted).
    std::vector<std::pair<int, int>> fabric_pairs;

    // False for a rank outside the records or in no domain.
    bool same_domain(int a, int b) const noexcept;
};

// records[r] is rank r's record.
FabricDomains group_by_fabric_domain(const std::vector<RankRecord>& records);

}  // namespace cudyn::mpi
