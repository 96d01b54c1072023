// cudyn — ranks grouped by NVLink fabric domain.
#include "cudyn/mpi/fabric_domains.hpp"

namespace cudyn::mpi {

namespace {

// The device of a rank that speaks for it: its first with a fabric domain.
// An all-zero cluster UUID is no domain: NVML reports it for GPUs whose
// registration completed outside any multi-node fabric (NVLink inside one
// node only), and such GPUs share nothing through fabric handles.
const DeviceReport* fabric_device(const RankRecord& record) noexcept {
    for (const DeviceReport& device : record.devices)
        if (device.fabric && !device.fabric->cluster_uuid.is_zero()) return &device;
    return nullptr;
}

bool can_export_fabric(const DeviceReport& device) noexcept {
    return device.fabric->healthy && device.fingerprint &&
           device.fingerprint->outcome("fabric_export") == TrialOutcome::Works;
}

}  // namespace

bool FabricDomains::same_domain(int a, int b) const noexcept {
    const auto ranks = static_cast<int>(domain_of_rank.size());
    if (a < 0 || b < 0 || a >= ranks || b >= ranks) return false;
    const int domain = domain_of_rank[static_cast<std::size_t>(a)];
    return domain >= 0 && domain == domain_of_rank[static_cast<std::size_t>(b)];
}

FabricDomains group_by_fabric_domain(const std::vector<RankRecord>& records) {
    FabricDomains groups;
    groups.domain_of_rank.assign(records.size(), -1);
    for (std::size_t rank = 0; rank < records.size(); ++rank) {
        const DeviceReport* device = fabric_device(records[rank]);
        if (device == nullptr) continue;
        std::size_t domain = 0;
        while (domain < groups.domains.size() && !(groups.domains[domain].cluster_uuid == device->fabric->cluster_uuid &&
                                                   groups.domains[domain].clique_id == device->fabric->clique_id))
            ++domain;
        if (domain == groups.domains.size())
            groups.domains.push_back({device->fabric->cluster_uuid, device->fabric->clique_id, {}});
        groups.domains[domain].ranks.push_back(static_cast<int>(rank));
        groups.domain_of_rank[rank] = static_cast<int>(domain);
    }
    for (const FabricDomains::Domain& domain : groups.domains)
        for (std::size_t i = 0; i < domain.ranks.size(); ++i)
            for (std::size_t j = i + 1; j < domain.ranks.size(); ++j) {
                const int a = domain.ranks[i], b = domain.ranks[j];
                if (can_export_fabric(*fabric_device(records[static_cast<std::size_t>(a)])) &&
                    can_export_fabric(*fabric_device(records[static_cast<std::size_t>(b)])))
                    groups.fabric_pairs.emplace_back(a, b);
            }
    return groups;
}

}  // namespace cudyn::mpi
